"""A real MCP host for the mcp-proxy tests: the PyPI `mcp` 1.x client.

usage: host.py MODE [args...] -- COMMAND [ARGS...]
  everything          list every tool and call each one; print {"tools":..., "results":...}
  call NAME JSON      initialize, call one tool, print its result
  calls N1 J1 N2 J2.. call several tools; a JSON-RPC error is printed as {"rpcError":...}
  tools NAME JSON     (graphmind mcp) list tools, then call NAME with JSON; print both
  mapping             read the first resource, get "simple-prompt", call
                      trigger-sampling-request (answered by this host's sampling callback);
                      print {"resource": uri, "prompt": ..., "sampling": text}
Nothing but the JSON answer goes to stdout.
"""
import asyncio, json, re, sys
from mcp import ClientSession, StdioServerParameters
from mcp.shared.exceptions import McpError
from mcp.client.stdio import stdio_client
from mcp import types


async def sample(context, params):
    """The host's answer to a server's sampling/createMessage (no real model)."""
    return types.CreateMessageResult(role="assistant", model="host-model", content=types.TextContent(type="text", text="sampled by the host"), stopReason="endTurn")

# Values for the arguments a schema alone does not make safe offline / quick.
OVERRIDES = {
    "gzip-file-as-resource": {"data": "data:text/plain;base64,aGVsbG8gd29ybGQ=", "outputType": "resource"},
    "trigger-long-running-operation": {"duration": 0.2, "steps": 1},
    "get-sum": {"a": 2, "b": 40},
}


def args_for(tool):
    schema = tool.inputSchema or {}
    props = schema.get("properties") or {}
    out = {}
    for name in schema.get("required") or []:
        p = props.get(name, {})
        if "enum" in p:
            out[name] = p["enum"][0]
        elif p.get("type") in ("number", "integer"):
            out[name] = p.get("minimum", 1)
        elif p.get("type") == "boolean":
            out[name] = False
        else:
            out[name] = "hello ünïcode ✓"
    out.update(OVERRIDES.get(tool.name, {}))
    return out


async def main():
    argv = sys.argv[1:]
    cut = argv.index("--")
    mode, rest, cmd = argv[0], argv[1:cut], argv[cut + 1:]
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=None)
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, sampling_callback=sample if mode == "mapping" else None) as s:
            await asyncio.wait_for(s.initialize(), 20)
            if mode == "everything":
                tools = (await s.list_tools()).tools
                results = {}
                for t in tools:
                    res = await asyncio.wait_for(s.call_tool(t.name, args_for(t)), 20)
                    # server-everything stamps some resources with the wall-clock time.
                    stable = re.sub(r"\d{1,2}:\d{2}:\d{2}\s?[AP]M", "<time>", res.model_dump_json())
                    results[t.name] = json.loads(stable)
                print(json.dumps({"tools": [json.loads(t.model_dump_json()) for t in tools], "results": results}, sort_keys=True))
            elif mode == "call":
                res = await asyncio.wait_for(s.call_tool(rest[0], json.loads(rest[1])), 30)
                print(res.model_dump_json())
            elif mode == "calls":
                # Several calls in a row; a JSON-RPC error is reported, not raised.
                out = []
                for i in range(0, len(rest), 2):
                    try:
                        res = await asyncio.wait_for(s.call_tool(rest[i], json.loads(rest[i + 1])), 30)
                        out.append(json.loads(res.model_dump_json()))
                    except McpError as e:
                        out.append({"rpcError": {"code": e.error.code, "message": e.error.message}})
                print(json.dumps(out))
            elif mode == "mapping":
                uri = str((await s.list_resources()).resources[0].uri)
                res = await asyncio.wait_for(s.read_resource(uri), 20)
                prompt = await asyncio.wait_for(s.get_prompt("simple-prompt"), 20)
                sampled = await asyncio.wait_for(s.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}), 20)
                print(json.dumps({
                    "resource": uri,
                    "resourceContents": len(res.contents),
                    "prompt": len(prompt.messages),
                    "sampling": sampled.content[0].text,
                }))
            elif mode == "tools":
                tools = (await s.list_tools()).tools
                out = {"tools": [json.loads(t.model_dump_json()) for t in tools], "calls": []}
                for i in range(0, len(rest), 2):
                    res = await s.call_tool(rest[i], json.loads(rest[i + 1]))
                    out["calls"].append(json.loads(res.model_dump_json()))
                print(json.dumps(out))


asyncio.run(main())

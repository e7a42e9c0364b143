// `?fixture=demo` and `?fixture=mcp`: a recorded run shipped inside the viewer, opened
// read-only with no server (like an exported run). `demo` is the recording `graphmind demo`
// replays (cli/src/demo/trip-planner.ndjson: the trip planner held at a loop and an error);
// `mcp` a session of the MCP reference server `server-everything` through
// `graphmind mcp-proxy` (initialize, tools/list, three tools/call).
import demo from '../../cli/src/demo/trip-planner.ndjson?raw';
import mcp from './fixtures/mcp-session.ndjson?raw';

const FIXTURES: Record<string, string> = { demo, mcp };

/** The fixture's events, or why it cannot be shown. */
export function fixtureEvents(name: string): { events: any[] } | string {
  const text = FIXTURES[name];
  if (text === undefined) return `there is no fixture "${name}" (try ?fixture=demo or ?fixture=mcp)`;
  const events: any[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line));
    } catch {
      return `the fixture "${name}" has a line that is not JSON`;
    }
  }
  return { events };
}

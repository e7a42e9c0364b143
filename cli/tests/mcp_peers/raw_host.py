"""A byte-level MCP host: writes the request lines of FRAMES_FILE to COMMAND's stdin one at a
time, waits for each request's answer, and writes every byte COMMAND printed on stdout to
OUT_FILE. usage: raw_host.py FRAMES_FILE OUT_FILE -- COMMAND [ARGS...]"""
import json, subprocess, sys

argv = sys.argv[1:]
cut = argv.index("--")
frames_file, out_file, cmd = argv[0], argv[1], argv[cut + 1:]
p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
captured = bytearray()
with open(frames_file, "rb") as f:
    lines = [l for l in f.read().split(b"\n") if l]
for line in lines:
    p.stdin.write(line + b"\n")
    p.stdin.flush()
    msg = json.loads(line)
    if "id" not in msg:
        continue
    while True:
        got = p.stdout.readline()
        if not got:
            sys.exit("server closed stdout before answering")
        captured += got
        try:
            if json.loads(got).get("id") == msg["id"]:
                break
        except Exception:
            pass
p.stdin.close()
p.wait(timeout=15)
with open(out_file, "wb") as f:
    f.write(bytes(captured))

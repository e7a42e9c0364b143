#!/usr/bin/env node
'use strict';
// `graphmind` from @graphmind/node: runs the bundled server binary with the same arguments,
// passes SIGINT/SIGTERM/SIGHUP on to it, and exits as it exited.
const { spawn } = require('node:child_process');
const { serverPath } = require('../native.js');

let bin;
try {
  bin = serverPath();
} catch (error) {
  console.error(error.message);
  process.exit(127);
}
const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit' });
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'];
for (const signal of FORWARDED) process.on(signal, () => child.kill(signal));
child.on('error', (error) => {
  console.error(`graphmind: could not start ${bin}: ${error.message}`);
  process.exit(127);
});
child.on('exit', (code, signal) => {
  if (signal) {
    for (const s of FORWARDED) process.removeAllListeners(s);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});

'use strict';
// CPU time of this (the JavaScript) thread in microseconds: the scheduler's
// `se.sum_exec_runtime` of /proc/thread-self/sched (nanosecond accounting, printed in ms
// with six decimals), or else utime + stime of /proc/thread-self/stat (clock ticks, 10 ms:
// coarse at a 100 ms block). `null` off Linux.
const fs = require('node:fs');

const EXEC_RUNTIME = /se\.sum_exec_runtime\s*:\s*([\d.]+)/;

function fromSched() {
  const m = EXEC_RUNTIME.exec(fs.readFileSync('/proc/thread-self/sched', 'utf8'));
  return m ? Number(m[1]) * 1000 : null;
}

function fromStat() {
  const f = fs.readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

let read = null;
for (const source of [fromSched, fromStat]) {
  try {
    if (source() !== null) {
      read = source;
      break;
    }
  } catch { /* not on this system */ }
}

function threadCpuUs() {
  return read === null ? null : read();
}

module.exports = { threadCpuUs };

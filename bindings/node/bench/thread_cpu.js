'use strict';
// CPU time of this (the JavaScript) thread in microseconds: utime + stime of
// /proc/thread-self/stat (clock ticks, 10 ms; the figures run >= 2 s each). `null` off Linux.
const fs = require('node:fs');

function threadCpuUs() {
  try {
    const f = fs.readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10_000;
  } catch {
    return null;
  }
}

module.exports = { threadCpuUs };

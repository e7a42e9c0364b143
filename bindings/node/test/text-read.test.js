'use strict';
// JSON text crosses into the core as UTF-16 and is encoded to UTF-8 by the binding
// (src/text.rs): every kind of character, at every position around the encoder's
// sixteen-unit ASCII runs, must reach the core unchanged.
const test = require('node:test');
const assert = require('node:assert/strict');
const gm = require('..');

const CHARACTERS = ['a', '\u007f', '\u0080', 'é', '\u07ff', '\u0800', '✓', '\uffff', '😀', '\u{10ffff}'];

test('every character, at every offset from the ASCII runs, reaches the core unchanged', () => {
  for (const ch of CHARACTERS) {
    for (let before = 0; before <= 33; before += 1) {
      const text = `${'x'.repeat(before)}${ch}${'y'.repeat(9)}${ch}`;
      assert.equal(gm.canonicalJson([text]), JSON.stringify([text]), `${JSON.stringify(ch)} after ${before}`);
    }
  }
});

test('a lone surrogate arrives as the escape JSON.stringify writes, and its value is kept', () => {
  for (const lone of ['\ud800', '\udfff', '\ud83d']) {
    const text = `ab${lone}cd`;
    const canonical = gm.canonicalJson({ t: text });
    assert.equal(JSON.parse(canonical).t, text);
  }
});

test('1 KB of mixed scripts, past the sixteen-unit runs, reaches the core unchanged', () => {
  const value = { q: '“canonical” JSON – ünïcødé ✓ 😀'.repeat(30), n: 42 };
  assert.equal(gm.canonicalJson(value), JSON.stringify({ n: 42, q: value.q }));
});

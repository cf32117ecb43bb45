// The wasm32-unknown-unknown build's exports, called as a browser would call them (plain
// WebAssembly.instantiate, no imports, data through linear memory), checked against f64
// references computed here. `node --test crates/trueno-wasm/tests/` with TRUENO_WASM
// naming the .wasm (scripts/cross-test.sh builds it with +simd128, and without it, when
// TRUENO_WASM_BACKEND=scalar says the scalar backend must run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const file = process.env.TRUENO_WASM;
assert.ok(file, 'TRUENO_WASM must name the trueno_wasm.wasm to test');
const { instance } = await WebAssembly.instantiate(readFileSync(file), {});
const w = instance.exports;
const OK = 0, ERR_INPUT = -1, ERR_NULL = -2;

// A deterministic sample source (an LCG), independent of the code under test.
let seed = 12345;
const rand = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 2 ** 32 * 2 - 1;
};

function put(values) {
  const p = w.trueno_alloc(values.length);
  new Float32Array(w.memory.buffer, p, values.length).set(values);
  return p;
}
const get = (p, n) => Float32Array.from(new Float32Array(w.memory.buffer, p, n));
const ragged = [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1001];

const expected = process.env.TRUENO_WASM_BACKEND ?? 'wasm-simd128';

test(`the ${expected} backend is the one that runs`, () => {
  const p = w.trueno_alloc(8);
  const len = w.trueno_backend_name(p, 32);
  const name = new TextDecoder().decode(new Uint8Array(w.memory.buffer, p, len));
  assert.equal(name, expected);
  w.trueno_free(p, 8);
});

test('dot and add match f64 references at ragged lengths', () => {
  for (const n of ragged) {
    const a = Array.from({ length: n }, rand), b = Array.from({ length: n }, rand);
    const af = Float32Array.from(a), bf = Float32Array.from(b);
    const [pa, pb, po] = [put(af), put(bf), w.trueno_alloc(n)];
    const out = w.trueno_alloc(1);
    assert.equal(w.trueno_dot(pa, pb, n, out), OK);
    let want = 0, mass = 0;
    for (let i = 0; i < n; i++) { want += af[i] * bf[i]; mass += Math.abs(af[i] * bf[i]); }
    const got = get(out, 1)[0];
    assert.ok(Math.abs(got - want) <= n * 1.2e-7 * mass + 1e-30, `dot n=${n}: ${got} vs ${want}`);
    assert.equal(w.trueno_add(pa, pb, po, n), OK);
    const sum = get(po, n);
    for (let i = 0; i < n; i++) assert.equal(sum[i], Math.fround(af[i] + bf[i]), `add n=${n} i=${i}`);
    for (const [p, len] of [[pa, n], [pb, n], [po, n], [out, 1]]) w.trueno_free(p, len);
  }
});

test('softmax matches exp(x - max) / sum; NaN, empty and null inputs never trap', () => {
  for (const n of ragged) {
    const x = Float32Array.from({ length: n }, () => rand() * 20);
    const [px, po] = [put(x), w.trueno_alloc(n)];
    assert.equal(w.trueno_softmax(px, po, n), OK);
    const y = get(po, n);
    const m = Math.max(...x);
    const e = Array.from(x, (v) => Math.exp(v - m));
    const s = e.reduce((p, q) => p + q, 0);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(y[i] - e[i] / s) <= 1e-6, `softmax n=${n} i=${i}`);
    w.trueno_free(px, n);
    w.trueno_free(po, n);
  }
  const bad = put(Float32Array.from([1, NaN, 2]));
  const out = w.trueno_alloc(3);
  const status = w.trueno_softmax(bad, out, 3);
  // A NaN input either propagates (OK with NaN out) or is reported; never a trap.
  assert.ok(status === OK ? get(out, 3).some(Number.isNaN) : status === ERR_INPUT);
  assert.equal(w.trueno_softmax(bad, out, 0), ERR_INPUT);
  assert.equal(w.trueno_softmax(0, out, 3), ERR_NULL);
});

test('gemm matches an f64 triple loop at ragged shapes', () => {
  for (const [m, n, k] of [[1, 1, 1], [3, 5, 7], [17, 9, 33], [40, 31, 65]]) {
    const a = Float32Array.from({ length: m * k }, rand), b = Float32Array.from({ length: k * n }, rand);
    const [pa, pb, pc] = [put(a), put(b), w.trueno_alloc(m * n)];
    assert.equal(w.trueno_gemm(m, n, k, pa, pb, pc), OK);
    const c = get(pc, m * n);
    for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) {
      let s = 0, mass = 0;
      for (let p = 0; p < k; p++) { s += a[i * k + p] * b[p * n + j]; mass += Math.abs(a[i * k + p] * b[p * n + j]); }
      assert.ok(Math.abs(c[i * n + j] - s) <= k * 1.2e-7 * mass + 1e-30, `gemm ${m}x${n}x${k} (${i},${j})`);
    }
    for (const [p, len] of [[pa, m * k], [pb, k * n], [pc, m * n]]) w.trueno_free(p, len);
  }
});

test('the quantized Q4_K matvec stays within its rounding of the f32 product', () => {
  const [rows, cols] = [7, 512];
  const wt = Float32Array.from({ length: rows * cols }, rand), x = Float32Array.from({ length: cols }, rand);
  const [pw, px, py] = [put(wt), put(x), w.trueno_alloc(rows)];
  assert.equal(w.trueno_matvec_q4k(rows, cols, pw, px, py), OK);
  const y = get(py, rows);
  for (let r = 0; r < rows; r++) {
    let s = 0, mass = 0;
    for (let c = 0; c < cols; c++) { s += wt[r * cols + c] * x[c]; mass += Math.abs(x[c]); }
    // Q4_K steps are at most max|w| / 15 (< 0.07 here); Q8_K adds max|x| / 127 per element.
    assert.ok(Math.abs(y[r] - s) <= 0.035 * mass + 0.004 * cols, `row ${r}: ${y[r]} vs ${s}`);
  }
  assert.equal(w.trueno_matvec_q4k(rows, 100, pw, px, py), ERR_INPUT);
});

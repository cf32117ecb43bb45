// C = A * B, row-major, A m x k, B k x n, any sizes. Each 16 x 16 workgroup computes a
// 128 x 128 tile of C, each thread an 8 x 8 block held in sixteen vec4 registers (written
// out, not as an array, so no driver spills it to local memory), over k in steps of 16
// staged in workgroup memory k-major. A thread's 8 rows are two groups of 4, 64 apart, and
// so are its 8 columns: neighbouring threads then read neighbouring vec4 of the staged B
// (no bank conflicts) and store neighbouring vec4 of C. Loads past an edge read 0; stores
// past it are skipped.
// Measured on an H100 at 4096 (BENCHMARKS.md): 64 x 64 tiles with 4 x 4 blocks 16.1
// TFLOP/s; 128 x 128 with k-steps of 8, 20.5; of 16, 22.4; without wgpu's runtime checks
// (kernels.rs), 25.0; each thread's rows and columns in two groups 64 apart (conflict-free
// reads of the staged tiles), 26.5. Prefetching the next k-step into registers lost (18.5: fewer
// resident workgroups); WGSL's fma() and a * b + c ran the same.

struct Dims { m: u32, n: u32, k: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<uniform> D: Dims;

// As[kk][row / 4], Bs[kk][col / 4]: 16 k-steps of 128 rows / columns, as vec4.
var<workgroup> As: array<vec4<f32>, 512>;
var<workgroup> Bs: array<vec4<f32>, 512>;

// Row r of C: columns c .. c + 4 from v0, c + 64 .. c + 68 from v1.
fn store_row(r: u32, c: u32, v0: vec4<f32>, v1: vec4<f32>) {
    if (r >= D.m) { return; }
    let base = r * D.n;
    for (var j = 0u; j < 4u; j++) {
        if (c + j < D.n) { C[base + c + j] = v0[j]; }
        if (c + 64u + j < D.n) { C[base + c + 64u + j] = v1[j]; }
    }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let row0 = wg.y * 128u;
    let col0 = wg.x * 128u;
    var c00 = vec4<f32>(0.0);
    var c01 = vec4<f32>(0.0);
    var c10 = vec4<f32>(0.0);
    var c11 = vec4<f32>(0.0);
    var c20 = vec4<f32>(0.0);
    var c21 = vec4<f32>(0.0);
    var c30 = vec4<f32>(0.0);
    var c31 = vec4<f32>(0.0);
    var c40 = vec4<f32>(0.0);
    var c41 = vec4<f32>(0.0);
    var c50 = vec4<f32>(0.0);
    var c51 = vec4<f32>(0.0);
    var c60 = vec4<f32>(0.0);
    var c61 = vec4<f32>(0.0);
    var c70 = vec4<f32>(0.0);
    var c71 = vec4<f32>(0.0);
    // A loads: two threads per row, eight consecutive k each (64 contiguous bytes per row).
    let ar = li / 2u;
    let ak = (li % 2u) * 8u;
    // B loads: 16 threads per k row, eight consecutive columns each (512 contiguous bytes).
    let bk = li / 16u;
    let bc = (li % 16u) * 8u;
    for (var k0 = 0u; k0 < D.k; k0 += 16u) {
        let gr = row0 + ar;
        for (var j = 0u; j < 8u; j++) {
            let gk = k0 + ak + j;
            var v = 0.0;
            if (gr < D.m && gk < D.k) { v = A[gr * D.k + gk]; }
            As[(ak + j) * 32u + ar / 4u][ar % 4u] = v;
        }
        let gk = k0 + bk;
        var w0 = vec4<f32>(0.0);
        var w1 = vec4<f32>(0.0);
        for (var j = 0u; j < 4u; j++) {
            let gc = col0 + bc + j;
            if (gk < D.k && gc < D.n) { w0[j] = B[gk * D.n + gc]; }
            if (gk < D.k && gc + 4u < D.n) { w1[j] = B[gk * D.n + gc + 4u]; }
        }
        Bs[bk * 32u + bc / 4u] = w0;
        Bs[bk * 32u + bc / 4u + 1u] = w1;
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            let a0 = As[kk * 32u + lid.y];
            let a1 = As[kk * 32u + 16u + lid.y];
            let b0 = Bs[kk * 32u + lid.x];
            let b1 = Bs[kk * 32u + 16u + lid.x];
            c00 += a0.x * b0;
            c01 += a0.x * b1;
            c10 += a0.y * b0;
            c11 += a0.y * b1;
            c20 += a0.z * b0;
            c21 += a0.z * b1;
            c30 += a0.w * b0;
            c31 += a0.w * b1;
            c40 += a1.x * b0;
            c41 += a1.x * b1;
            c50 += a1.y * b0;
            c51 += a1.y * b1;
            c60 += a1.z * b0;
            c61 += a1.z * b1;
            c70 += a1.w * b0;
            c71 += a1.w * b1;
        }
        workgroupBarrier();
    }
    let r0 = row0 + lid.y * 4u;
    let c0 = col0 + lid.x * 4u;
    store_row(r0 + 0u, c0, c00, c01);
    store_row(r0 + 1u, c0, c10, c11);
    store_row(r0 + 2u, c0, c20, c21);
    store_row(r0 + 3u, c0, c30, c31);
    store_row(r0 + 64u, c0, c40, c41);
    store_row(r0 + 65u, c0, c50, c51);
    store_row(r0 + 66u, c0, c60, c61);
    store_row(r0 + 67u, c0, c70, c71);
}

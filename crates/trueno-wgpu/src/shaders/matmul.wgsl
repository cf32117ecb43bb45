// C = A * B, row-major, A m x k, B k x n, any sizes. Each 16 x 16 workgroup computes a
// 64 x 64 tile of C, each thread a 4 x 4 register block, over k in steps of 16 staged in
// workgroup memory (loads past an edge read as 0, stores past an edge are skipped).

struct Dims { m: u32, n: u32, k: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<uniform> D: Dims;

// k-major tiles: As[kk][row], Bs[kk][col], as vec4 so each thread reads its 4 rows / 4
// columns in one load.
var<workgroup> As: array<vec4<f32>, 256>;
var<workgroup> Bs: array<vec4<f32>, 256>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let row0 = wg.y * 64u;
    let col0 = wg.x * 64u;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < D.k; k0 += 16u) {
        // A tile: 64 rows x 16 k; thread li loads rows li/16 + 16t at k li%16 (16
        // neighbouring threads read 16 consecutive floats of one row).
        for (var t = 0u; t < 4u; t++) {
            let r = li / 16u + 16u * t;
            let kk = li % 16u;
            let gr = row0 + r;
            let gk = k0 + kk;
            var v = 0.0;
            if (gr < D.m && gk < D.k) { v = A[gr * D.k + gk]; }
            As[kk * 16u + r / 4u][r % 4u] = v;
        }
        // B tile: 16 k x 64 columns; 64 neighbouring threads read one row segment.
        for (var t = 0u; t < 4u; t++) {
            let e = li + 256u * t;
            let kk = e / 64u;
            let c = e % 64u;
            let gk = k0 + kk;
            let gc = col0 + c;
            var v = 0.0;
            if (gk < D.k && gc < D.n) { v = B[gk * D.n + gc]; }
            Bs[kk * 16u + c / 4u][c % 4u] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            let a = As[kk * 16u + lid.y];
            let b = Bs[kk * 16u + lid.x];
            acc[0] = fma(vec4<f32>(a.x), b, acc[0]);
            acc[1] = fma(vec4<f32>(a.y), b, acc[1]);
            acc[2] = fma(vec4<f32>(a.z), b, acc[2]);
            acc[3] = fma(vec4<f32>(a.w), b, acc[3]);
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let r = row0 + lid.y * 4u + i;
        if (r < D.m) {
            for (var j = 0u; j < 4u; j++) {
                let c = col0 + lid.x * 4u + j;
                if (c < D.n) { C[r * D.n + c] = acc[i][j]; }
            }
        }
    }
}

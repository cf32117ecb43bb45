// y = x^T A (A rows x cols, row-major): one thread per column walks down the rows, so
// neighbouring threads read neighbouring floats of each row.

struct Params { rows: u32, cols: u32, eps: f32, pad: u32 }

@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> W: array<f32>;
@group(0) @binding(2) var<storage, read> Bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
@group(0) @binding(4) var<uniform> P: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var j = gid.x; j < P.cols; j += stride) {
        var acc = 0.0;
        for (var i = 0u; i < P.rows; i++) {
            acc = fma(W[i], X[i * P.cols + j], acc);
        }
        Y[j] = acc;
    }
}

// Row-wise kernels, one workgroup of 256 per row (rows spread over x and y of the dispatch,
// so more than 65535 fit): GEMV y = A x, RMSNorm and LayerNorm. kernels.rs splices in the body.

struct Params { rows: u32, cols: u32, eps: f32, pad: u32 }

@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> W: array<f32>;
@group(0) @binding(2) var<storage, read> Bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> red: array<f32, 256>;

// Sum of `v` over the workgroup (every thread gets it). Called in uniform control flow.
fn wg_sum(li: u32, v: f32) -> f32 {
    red[li] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (li < s) { red[li] += red[li + s]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    // Uniform per workgroup, so the barriers below stay in uniform control flow.
    if (row >= P.rows) { return; }
    let base = row * P.cols;
    {{BODY}}
}

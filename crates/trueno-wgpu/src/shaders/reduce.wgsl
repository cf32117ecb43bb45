// One reduction pass: each workgroup folds a grid-stride share of `ELEM(i)` (for i < n)
// into one partial, written to out[workgroup]. The second pass runs the same shader over
// the partials with elem(i) = a[i]. combine() and its identity define the fold (sum, max, min);
// max and min propagate NaN, as on the CPU.

struct Params { n: u32, p0: f32, p1: f32, pad: u32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read> aux: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> part: array<f32, 256>;

fn combine(u: f32, v: f32) -> f32 {
    {{COMBINE}}
}

fn finish(v: f32) -> f32 {
    {{FINISH}}
}

fn elem(i: u32) -> f32 {
    let x = a[i];
    {{ELEM}}
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    var acc = {{IDENTITY}};
    for (var i = gid.x; i < P.n; i += stride) {
        acc = combine(acc, elem(i));
    }
    part[li] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (li < s) {
            part[li] = combine(part[li], part[li + s]);
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        out[wg.x] = finish(part[0]);
    }
}

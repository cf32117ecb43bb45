// argmax / argmin, in passes like reduce.wgsl: each workgroup writes the (value, index) of
// its best element; later passes fold those pairs (`first` = 0) until one is left. The
// first of equal extremes wins, and the first NaN beats every number, as on the CPU.

struct Params { n: u32, is_max: u32, first: u32, pad: u32 }

@group(0) @binding(0) var<storage, read> vals: array<f32>;
@group(0) @binding(1) var<storage, read> idx: array<u32>;
@group(0) @binding(2) var<storage, read_write> out_vals: array<f32>;
@group(0) @binding(3) var<storage, read_write> out_idx: array<u32>;
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> pv: array<f32, 256>;
var<workgroup> pi: array<u32, 256>;

// Whether (v, i) beats (w, j): NaN first, then the extreme, then the lower index.
fn beats(v: f32, i: u32, w: f32, j: u32) -> bool {
    let vn = t_is_nan(v);
    let wn = t_is_nan(w);
    if (vn || wn) {
        return vn && (!wn || i < j);
    }
    if (v == w) { return i < j; }
    return select((v < w), (v > w), P.is_max == 1u);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    var bv = 0.0;
    var bi = 0xffffffffu;
    for (var i = gid.x; i < P.n; i += stride) {
        let j = select(idx[i], i, P.first == 1u);
        if (bi == 0xffffffffu || beats(vals[i], j, bv, bi)) {
            bv = vals[i];
            bi = j;
        }
    }
    pv[li] = bv;
    pi[li] = bi;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (li < s && pi[li + s] != 0xffffffffu
            && (pi[li] == 0xffffffffu || beats(pv[li + s], pi[li + s], pv[li], pi[li]))) {
            pv[li] = pv[li + s];
            pi[li] = pi[li + s];
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        out_vals[wg.x] = pv[0];
        out_idx[wg.x] = pi[0];
    }
}

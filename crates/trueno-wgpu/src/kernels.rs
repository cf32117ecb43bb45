//! WGSL assembly and the pipeline cache: each shader is built from a template plus an op
//! body, compiled once per device on first use, and kept for the device's lifetime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const MATH: &str = include_str!("shaders/math.wgsl");
const ELEMENTWISE: &str = include_str!("shaders/elementwise.wgsl");
const REDUCE: &str = include_str!("shaders/reduce.wgsl");
const ARGREDUCE: &str = include_str!("shaders/argreduce.wgsl");
const MATMUL: &str = include_str!("shaders/matmul.wgsl");
const ROWS: &str = include_str!("shaders/rows.wgsl");
const GEMV_COLS: &str = include_str!("shaders/gemv_cols.wgsl");

/// How a binding is declared in WGSL.
#[derive(Clone, Copy)]
enum Bind {
    Read,
    Write,
    Uniform,
}

/// The binding lists of the shader families (one bind group layout each).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Family {
    /// a, b, c, out, params, aux (elementwise.wgsl).
    Elementwise,
    /// a, b, aux, out, params (reduce.wgsl).
    Reduce,
    /// vals, idx, out_vals, out_idx, params (argreduce.wgsl).
    ArgReduce,
    /// A, B, C, dims (matmul.wgsl).
    Matmul,
    /// X, W, Bias, Y, params (rows.wgsl, gemv_cols.wgsl).
    Rows,
}

impl Family {
    const ALL: [Family; 5] = [
        Family::Elementwise,
        Family::Reduce,
        Family::ArgReduce,
        Family::Matmul,
        Family::Rows,
    ];

    fn binds(self) -> &'static [Bind] {
        use Bind::*;
        match self {
            Family::Elementwise => &[Read, Read, Read, Write, Uniform, Read],
            Family::Reduce => &[Read, Read, Read, Write, Uniform],
            Family::ArgReduce => &[Read, Read, Write, Write, Uniform],
            Family::Matmul => &[Read, Read, Write, Uniform],
            Family::Rows => &[Read, Read, Read, Write, Uniform],
        }
    }
}

/// A shader: its cache key, family, and the parts of its WGSL source, which is assembled
/// only when the cache misses (ops look up their kernel on every call).
pub(crate) struct Kernel {
    pub(crate) key: String,
    pub(crate) family: Family,
    /// Whether math.wgsl goes in front of the template.
    math: bool,
    template: &'static str,
    /// `{{PLACEHOLDER}}` -> text.
    subs: Vec<(&'static str, &'static str)>,
    /// Compiled without wgpu's per-access bounds checks and loop counters: only for a
    /// shader whose every index is proven in range (see `matmul`).
    unchecked: bool,
}

/// `elementwise.wgsl` with `body` as the op (`x = a[i]`; `return` the result).
impl Kernel {
    /// The WGSL text.
    pub(crate) fn source(&self) -> String {
        let mut src = self.template.to_string();
        for (from, to) in &self.subs {
            src = src.replace(from, to);
        }
        if self.math {
            format!("{MATH}\n{src}")
        } else {
            src
        }
    }
}

pub(crate) fn elementwise(name: &str, body: &'static str) -> Kernel {
    Kernel {
        key: format!("ew:{name}"),
        family: Family::Elementwise,
        math: true,
        template: ELEMENTWISE,
        subs: vec![("{{BODY}}", body)],
        unchecked: false,
    }
}

/// How partial results of a reduction combine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Fold {
    Sum,
    Max,
    Min,
}

impl Fold {
    fn wgsl(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Fold::Sum => ("sum", "return u + v;", "0.0"),
            Fold::Max => (
                "max",
                "if (t_is_nan(u)) { return u; }\n    if (t_is_nan(v)) { return v; }\n    return max(u, v);",
                "-t_inf()",
            ),
            Fold::Min => (
                "min",
                "if (t_is_nan(u)) { return u; }\n    if (t_is_nan(v)) { return v; }\n    return min(u, v);",
                "t_inf()",
            ),
        }
    }
}

/// A reduction pass: `elem` maps element i (`x = a[i]`, also `b[i]`, `aux[0]`), `fold`
/// combines, `finish` maps the workgroup's total `v` (`P.p0` holds n as f32).
pub(crate) fn reduce(name: &str, elem: &'static str, fold: Fold, finish: &'static str) -> Kernel {
    let (fname, combine, identity) = fold.wgsl();
    Kernel {
        key: format!("reduce:{name}:{fname}:{finish}"),
        family: Family::Reduce,
        math: true,
        template: REDUCE,
        subs: vec![
            ("{{COMBINE}}", combine),
            ("{{IDENTITY}}", identity),
            ("{{ELEM}}", elem),
            ("{{FINISH}}", finish),
        ],
        unchecked: false,
    }
}

pub(crate) fn argreduce() -> Kernel {
    Kernel {
        key: "argreduce".into(),
        family: Family::ArgReduce,
        math: true,
        template: ARGREDUCE,
        subs: Vec::new(),
        unchecked: false,
    }
}

/// The matmul runs without wgpu's runtime checks: on an H100 they cost 11% (22.4 against
/// 25.0 TFLOP/s at 4096; a clamp on each workgroup-memory load, a counter on every loop).
/// The memory-bound elementwise kernels gained 3% without them, within the noise, so they
/// keep them. It
/// needs none: global reads and writes are guarded by `r < m`, `k < K`, `c < n` against
/// buffers whose lengths `Batch::matmul_into` checked to be m·k, k·n and m·n; workgroup
/// indices stay below 16·32 by construction; and every loop counts up to a bound below
/// 2^31 (`matmul_into` refuses a larger k), so none wraps.
pub(crate) fn matmul() -> Kernel {
    Kernel {
        key: "matmul".into(),
        family: Family::Matmul,
        math: false,
        template: MATMUL,
        subs: Vec::new(),
        unchecked: true,
    }
}

/// Row kernels of rows.wgsl.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RowKernel {
    Gemv,
    RmsNorm,
    LayerNorm,
}

pub(crate) fn rows(k: RowKernel) -> Kernel {
    let (name, body) = match k {
        RowKernel::Gemv => (
            "gemv",
            "var acc = 0.0;
    for (var k = li; k < P.cols; k += 256u) { acc = fma(X[base + k], W[k], acc); }
    let s = wg_sum(li, acc);
    if (li == 0u) { Y[row] = s; }",
        ),
        RowKernel::RmsNorm => (
            "rmsnorm",
            "var ss = 0.0;
    for (var k = li; k < P.cols; k += 256u) { let v = X[base + k]; ss = fma(v, v, ss); }
    let r = 1.0 / sqrt(wg_sum(li, ss) / f32(P.cols) + P.eps);
    for (var k = li; k < P.cols; k += 256u) { Y[base + k] = X[base + k] * r * W[k]; }",
        ),
        RowKernel::LayerNorm => (
            "layernorm",
            "var s = 0.0;
    for (var k = li; k < P.cols; k += 256u) { s += X[base + k]; }
    let mean = wg_sum(li, s) / f32(P.cols);
    var q = 0.0;
    for (var k = li; k < P.cols; k += 256u) { let d = X[base + k] - mean; q = fma(d, d, q); }
    let r = 1.0 / sqrt(wg_sum(li, q) / f32(P.cols) + P.eps);
    for (var k = li; k < P.cols; k += 256u) {
        Y[base + k] = fma((X[base + k] - mean) * r, W[k], Bias[k]);
    }",
        ),
    };
    Kernel {
        key: format!("rows:{name}"),
        family: Family::Rows,
        math: false,
        template: ROWS,
        subs: vec![("{{BODY}}", body)],
        unchecked: false,
    }
}

pub(crate) fn gemv_cols() -> Kernel {
    Kernel {
        key: "gemv_cols".into(),
        family: Family::Rows,
        math: false,
        template: GEMV_COLS,
        subs: Vec::new(),
        unchecked: false,
    }
}

/// Compiled pipelines by kernel key, and one bind group layout per family.
pub(crate) struct PipelineCache {
    layouts: HashMap<Family, (wgpu::BindGroupLayout, wgpu::PipelineLayout)>,
    pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
}

impl PipelineCache {
    pub(crate) fn new(device: &wgpu::Device) -> PipelineCache {
        let layouts = Family::ALL
            .into_iter()
            .map(|f| {
                let entries: Vec<wgpu::BindGroupLayoutEntry> = f
                    .binds()
                    .iter()
                    .enumerate()
                    .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                        binding: i as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: match b {
                            Bind::Uniform => wgpu::BindingType::Buffer {
                                ty: wgpu::BufferBindingType::Uniform,
                                has_dynamic_offset: false,
                                min_binding_size: None,
                            },
                            Bind::Read | Bind::Write => wgpu::BindingType::Buffer {
                                ty: wgpu::BufferBindingType::Storage {
                                    read_only: matches!(b, Bind::Read),
                                },
                                has_dynamic_offset: false,
                                min_binding_size: None,
                            },
                        },
                        count: None,
                    })
                    .collect();
                let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("trueno-wgpu"),
                    entries: &entries,
                });
                let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some("trueno-wgpu"),
                    bind_group_layouts: &[Some(&bgl)],
                    immediate_size: 0,
                });
                (f, (bgl, pl))
            })
            .collect();
        PipelineCache {
            layouts,
            pipelines: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn layout(&self, f: Family) -> &wgpu::BindGroupLayout {
        &self.layouts[&f].0
    }

    /// The pipeline of `k`, compiled on first use.
    pub(crate) fn get(&self, device: &wgpu::Device, k: &Kernel) -> Arc<wgpu::ComputePipeline> {
        let mut map = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = map.get(&k.key) {
            return p.clone();
        }
        let source = k.source();
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(&k.key),
            source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
        };
        let module = if k.unchecked {
            // SAFETY: only kernels whose constructor proves every access in range and
            // every loop bounded set `unchecked` (today `matmul`, see its comment).
            unsafe {
                device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
            }
        } else {
            device.create_shader_module(desc)
        };
        let p = Arc::new(
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&k.key),
                layout: Some(&self.layouts[&k.family].1),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            }),
        );
        map.insert(k.key.clone(), p.clone());
        p
    }

    /// How many pipelines have been compiled (each shader once per device).
    pub(crate) fn len(&self) -> usize {
        self.pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{BinaryOp, UnaryOp};

    /// Every placeholder of every template is filled (a leftover `{{` would be a WGSL
    /// syntax error only on the device).
    #[test]
    fn templates_are_fully_spliced() {
        let mut all: Vec<Kernel> = UnaryOp::ALL
            .iter()
            .map(|o| elementwise(o.kernel().0, o.kernel().1))
            .chain(
                BinaryOp::ALL
                    .iter()
                    .map(|o| elementwise(o.kernel().0, o.kernel().1)),
            )
            .collect();
        for f in [Fold::Sum, Fold::Max, Fold::Min] {
            all.push(reduce("t", "return x;", f, "return v;"));
        }
        all.extend([argreduce(), matmul(), gemv_cols()]);
        all.extend([RowKernel::Gemv, RowKernel::RmsNorm, RowKernel::LayerNorm].map(rows));
        for k in all {
            let src = k.source();
            assert!(!src.contains("{{"), "{}: unfilled placeholder", k.key);
            assert!(src.contains("fn main("), "{}", k.key);
        }
    }
}

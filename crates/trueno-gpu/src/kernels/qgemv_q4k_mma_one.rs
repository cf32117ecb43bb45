//! One Q8_K activation vector against Q4_K or Q5_K weights on the integer tensor cores
//! (`mma.sync.m16n8k32.u8.s8`), the sub-blocks as the product's N. Why: the `dp4a` kernels
//! spend most of their instructions on each lane's scales, one (scale, min) pair per 16
//! weights (Nsight Compute, H200: issuing on 62% of a scheduler's cycles); here a lane
//! scales four sums a super-block, one per (row, sub-block), and the products are eight
//! `mma` a super-block of 16 rows: about 146 SASS instructions run a warp's 4096 weights
//! (the loop's 175 less its pin's never-taken body) against the `dp4a` pass's about 330
//! (sm_90).
//!
//! A block of eight or sixteen warps ([`TileWarps`]) takes 16 rows (the `mma`'s M); of
//! `W` warps, warp `w` takes super-blocks `w, w + W, ...` and the warps' sums meet in
//! shared memory. Lane `4g + t` loads rows `g` and `g + 8`: each one's 16-byte header and
//! all 32 bytes of quant group `t` (the low nibbles sub-block `2t`, the high ones `2t +
//! 1`). Step `e` of eight gives the A
//! fragment word `e` of the group: its low nibbles as the first k run (sub-block `2t`),
//! its high nibbles masked in place (16 times their value, so unsigned) as the second
//! (sub-block `2t + 1`). B column `n` stands for sub-block `n`: lane `4g + t` gives its
//! activation word `e` of sub-block `g` in the run that is sub-block `g` (the first where
//! `g == 2t`, the second where `g == 2t + 1`), zeros in every other. After the eight
//! steps `C[row, n]` is the row's exact integer dot product with sub-block `n`, and lane
//! `4g + t` holds rows `g`, `g + 8` of sub-blocks `2t`, `2t + 1`: it scales them by
//! their 6-bit scales and mins (a lane's two sub-blocks' bytes sit side by side in the
//! header, so one shift and mask serve both) into GGML's `dx (d isum - dmin msum)`.
//!
//! Q5_K's fifth bits (bit `2j` of byte `l` for element `l` of sub-block `2j`, `2j + 1`
//! for `2j + 1`) go through a second `mma` a step with the same B: lane `4g + t` masks
//! word `e` of each row's 32 bytes of them in place (bit `2t` as the first k run, `2t +
//! 1` as the second), so the products come out `2^(2t)` and `2^(2t + 1)` times theirs,
//! shifted down once and added 16 times to the nibbles' dots.
//!
//! A super-block's loads all leave before its first product (`qgemv_k::end_block`); the
//! first super-block's weights leave before the wait for the previous kernel
//! (overlapped launches), its activations after it.

use super::qgemv::QuantFormat;
use super::qgemv_k::{self, half_of};
use super::qgemv_mma_tile::{
    PassWait, TILE_ROWS, TileLane, TileRows, act_after_weights, scale_at, sums_at, tile_passes,
    tiles_for,
};
use super::qgemv_q6k_mma_one::{QgemvDevice, q6k_mma_one_for};
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Rounding, S32, Space, U32, U64};

/// Warps a block (one 16-row tile), each taking every `warps`-th super-block of the
/// tile's rows; the blocks a multiprocessor asked of ptxas follow ([`Self::min_blocks`]:
/// Q4_K's eight warps unasked held 74 registers, three blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileWarps {
    /// Eight warps, four blocks a multiprocessor for Q4_K (two for Q5_K). H200, Q4_K, one
    /// vector
    /// (`scripts/qgemv_q4k_forms.cu`, session 54): four warps a tile ran 1.01-1.40x
    /// slower at the four shapes of issue 9 (4096x14336 the most), two slower still;
    /// eight with two super-blocks' loads a pass (112 registers) 0.99-1.12x. Four blocks
    /// against three, in a graph of overlapped launches: 10.4-10.5 against 11.1-11.2 us
    /// at 14336x4096, 19.7 against 21.5 at 32000x4096; 4.7 against 4.4 at 4096x4096 and
    /// 12.4 against 11.8 at 4096x14336, where 256 and 512 blocks are less than a wave
    /// at either residency.
    Eight,
    /// Sixteen warps, two blocks a multiprocessor for Q4_K (one for Q5_K): twice the
    /// warps a row for products whose tiles fit one wave that way, where eight warps a
    /// tile leave half the multiprocessors' warp slots empty (H200, Q4_K: 1.07-1.32x
    /// eight at 512-4096 rows, [`mma_one_for`]).
    Sixteen,
}

impl TileWarps {
    const fn warps(self) -> u32 {
        match self {
            TileWarps::Eight => 8,
            TileWarps::Sixteen => 16,
        }
    }

    const fn threads(self) -> u32 {
        32 * self.warps()
    }

    /// Blocks a multiprocessor asked of ptxas for format `f`: 64 registers a thread for
    /// Q4_K, 128 for Q5_K, whose 32 bytes of fifth bits a row spilled at 64 (84 bytes)
    /// and at 80 (16); ptxas gives it 98, so two blocks of eight warps or one of sixteen.
    ///
    /// ```
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    /// use trueno_gpu::kernels::qgemv_q4k_mma_one::TileWarps;
    ///
    /// assert_eq!(TileWarps::Eight.min_blocks(QuantFormat::Q4K), 4);
    /// assert_eq!(TileWarps::Sixteen.min_blocks(QuantFormat::Q5K), 1);
    /// ```
    pub const fn min_blocks(self, f: QuantFormat) -> u32 {
        let regs = match f {
            QuantFormat::Q5K => 128,
            _ => 64,
        };
        65536 / (regs * self.threads())
    }
}

/// Where a Q5_K super-block's fifth bits start (32 bytes: bits `2j`, `2j + 1` of byte `l`
/// for element `l` of sub-blocks `2j`, `2j + 1`).
const QH_AT: u64 = 16;

/// `y = W a` for Q4_K or Q5_K weights `W` (the format, then the warps a tile) and one
/// Q8_K activation vector `a` on the integer tensor cores (see the module's doc);
/// parameters as [`super::qgemv_dp4a::QgemvQ8kKernel`]'s. `Stream::qgemv_q8k` takes it
/// as [`mma_one_for`] says (`Context::set_qgemv_tensor_cores(false)` keeps the `dp4a`
/// kernels).
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kMmaOneKernel(pub QuantFormat, pub TileWarps);

impl QgemvQ8kMmaOneKernel {
    /// The weight formats with this kernel.
    pub const FORMATS: [QuantFormat; 2] = [QuantFormat::Q4K, QuantFormat::Q5K];
}

/// The tensor-core kernel for a `rows`-row product of format `f` on a device of `sms`
/// multiprocessors, or `None` where the `dp4a` kernels keep up (or `f` has no such
/// kernel, [`QgemvQ8kMmaOneKernel::FORMATS`]): sixteen warps a tile where the tiles fit
/// one wave of them ([`TileWarps::min_blocks`] a multiprocessor), else eight (Q5_K: up
/// to two waves of eight, its `dp4a` kernels past that). The one place
/// `Stream::qgemv_q8k` and `trueno ptx map` decide it. H200 (132 multiprocessors: Q4_K
/// 264 tiles a wave of sixteen warps, 528 of eight; Q5_K 132 and 264), `gpu-bench` in a
/// graph, µs against the `dp4a` kernels in the same run (session 55). Q5_K:
///
/// | rows x cols | sixteen warps | eight | `dp4a` |
/// |---|---:|---:|---:|
/// | 1024 x 4096 | **2.02** | 3.10 | 3.02 |
/// | 4096 x 4096 | 5.58 | **4.53** | 4.78 |
/// | 4096 x 14336 | 14.36 | **12.03** | 13.39 |
/// | 8192 x 4096 | 10.05 | **7.99** | 8.38 |
/// | 14336 x 4096 | 16.62 | 14.00 | **13.95** |
/// | 32000 x 4096 | 35.06 | 27.68 | **27.26** |
///
/// Q4_K:
///
/// | rows x cols | sixteen warps | eight | `dp4a` |
/// |---|---:|---:|---:|
/// | 512 x 4096 | **1.79** | 2.15 | 2.05 |
/// | 1024 x 4096 | **2.21** | 2.66 | 2.65 |
/// | 2048 x 4096 | **2.78** | 3.36 | 3.20 |
/// | 4096 x 4096 | **4.00** | 4.27 | 4.10 |
/// | 1024 x 14336 | **5.87** | 7.76 | 7.02 |
/// | 2048 x 14336 | **7.41** | 9.16 | 7.78 |
/// | 4096 x 14336 | **10.01** | 11.86 | 10.52 |
/// | 4352 x 4096 | 5.04 | **4.73** | 5.48 |
/// | 5120 x 4096 | 5.18 | **4.68** | 5.76 |
/// | 5120 x 5120 | 7.14 | **5.76** | 7.02 |
/// | 5120 x 13824 | 15.31 | **14.28** | 15.90 |
/// | 6144 x 4096 | 5.69 | **4.94** | 5.93 |
/// | 8192 x 4096 | 6.62 | **6.02** | 7.02 |
/// | 14336 x 4096 | 10.47 | **9.81** | 11.49 |
/// | 32000 x 4096 | 20.60 | **19.33** | 22.30 |
///
/// ```
/// use trueno_gpu::kernels::qgemv::QuantFormat;
/// use trueno_gpu::kernels::qgemv_q4k_mma_one::{TileWarps, mma_one_for};
///
/// let warps = |f, rows| mma_one_for(f, rows, 132).map(|k| k.1);
/// assert_eq!(warps(QuantFormat::Q4K, 4096), Some(TileWarps::Sixteen));
/// assert_eq!(warps(QuantFormat::Q4K, 4240), Some(TileWarps::Eight));
/// assert_eq!(warps(QuantFormat::Q5K, 4096), Some(TileWarps::Eight));
/// assert_eq!(warps(QuantFormat::Q5K, 14336), None);
/// assert_eq!(warps(QuantFormat::Q6K, 14336), None);
/// ```
pub fn mma_one_for(f: QuantFormat, rows: usize, sms: u32) -> Option<QgemvQ8kMmaOneKernel> {
    if !QgemvQ8kMmaOneKernel::FORMATS.contains(&f) {
        return None;
    }
    let tiles = rows.div_ceil(TILE_ROWS as usize) as u64;
    let wave = |w: TileWarps| u64::from(sms) * u64::from(w.min_blocks(f));
    let warps = match tiles <= wave(TileWarps::Sixteen) {
        true => TileWarps::Sixteen,
        // Q5_K's 98 registers (two blocks of eight warps a multiprocessor): past two
        // waves of them its `dp4a` kernels keep up.
        false if f == QuantFormat::Q5K && tiles > 2 * wave(TileWarps::Eight) => return None,
        false => TileWarps::Eight,
    };
    Some(QgemvQ8kMmaOneKernel(f, warps))
}

/// The one-vector tensor-core kernel for a `rows` x `cols` product of format `f` on
/// device `dev`, any format: [`mma_one_for`]'s for Q4_K and Q5_K, [`q6k_mma_one_for`]'s
/// for Q6_K, else `None` (the `dp4a` kernels). What `Stream::qgemv_q8k` (unless
/// `Context::set_qgemv_tensor_cores(false)`) and `trueno ptx map` ask first.
///
/// ```
/// use trueno_gpu::kernels::qgemv::QuantFormat;
/// use trueno_gpu::kernels::qgemv_q4k_mma_one::tensor_core_kernel_for;
/// use trueno_gpu::kernels::qgemv_q6k_mma_one::QgemvDevice;
///
/// let on = |dev, f, rows, cols| tensor_core_kernel_for(f, rows, cols, dev).map(|k| k.name());
/// let name = |f, rows, cols| on(QgemvDevice::HOPPER_132, f, rows, cols);
/// assert_eq!(name(QuantFormat::Q4K, 4096, 4096).unwrap(), "trueno_qgemv_q4_k_q8k_mma1_w16");
/// assert_eq!(
///     name(QuantFormat::Q6K, 14336, 4096).unwrap(),
///     "trueno_qgemv_q6_k_q8k_mma1_b2_bulk_s2"
/// );
/// let a100 = QgemvDevice::A100_108;
/// assert_eq!(
///     on(a100, QuantFormat::Q6K, 14336, 4096).unwrap(),
///     "trueno_qgemv_q6_k_q8k_mma1_b3"
/// );
/// assert!(name(QuantFormat::Q8_0, 14336, 4096).is_none());
/// ```
pub fn tensor_core_kernel_for(
    f: QuantFormat,
    rows: usize,
    cols: usize,
    dev: QgemvDevice,
) -> Option<Box<dyn Kernel>> {
    match f {
        QuantFormat::Q6K => q6k_mma_one_for(rows, cols, dev).map(|k| Box::new(k) as _),
        _ => mma_one_for(f, rows, dev.sms).map(|k| Box::new(k) as _),
    }
}

impl Kernel for QgemvQ8kMmaOneKernel {
    fn name(&self) -> String {
        let width = match self.1 {
            TileWarps::Eight => "",
            TileWarps::Sixteen => "_w16",
        };
        format!("trueno_qgemv_{}_q8k_mma1{width}", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        build(self.name(), self.0, self.1)
    }

    /// `dims = [rows, cols]`, `cols` a multiple of 256: a block per 16 rows.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        if !Self::FORMATS.contains(&self.0) {
            return shape_err(
                &name,
                format!("no such kernel for {} weights", self.0.name()),
            );
        }
        let (rows, _) = self.0.check_matrix(&name, dims, 256)?;
        let tiles = tiles_for(rows, 0, TileRows::Adjacent);
        let tiles = blocks_for(&name, tiles, 1, i32::MAX as u32)?;
        Ok(LaunchConfig::linear(tiles, self.1.threads()))
    }
}

/// The lane's constants for the 6-bit scales and mins of its sub-blocks `2t`, `2t + 1`:
/// from the header's scale words `s1` (bytes 0-3), `s2` (4-7), `s3` (8-11), their two
/// bytes are `((x >> sh) & lo) | ((y >> (sh + 2)) & top)`, with `x` s1 / s2 (scales /
/// mins) and no top bits for sub-blocks 0-3, `x` s3 / s3's high nibbles and `y` s1 / s2
/// for 4-7 (GGML's `get_scale_min_k4`, two at a time).
struct LaneScales {
    /// Sub-blocks 0-3 or 4-7 (lanes `t < 2`, `t >= 2`).
    high: Reg<crate::ptx::Pred>,
    sh: Reg<U32>,
    sh2: Reg<U32>,
    lo: Reg<U32>,
    top: Reg<U32>,
}

impl LaneScales {
    fn new(b: &mut KernelBuilder, t: Reg<U32>) -> LaneScales {
        let high = b.setp::<U32>(Cmp::Ge, t, 2u32);
        let odd = b.and(t, 1u32);
        let sh = b.shl(odd, 4u32);
        LaneScales {
            high,
            sh,
            sh2: b.add(sh, 2u32),
            lo: b.selp(LOW_MASK[1], LOW_MASK[0], high),
            top: b.selp(TOP_MASK[1], TOP_MASK[0], high),
        }
    }

    /// The lane's two scales and two mins (each pair as bytes 0 and 1 of a word) from a
    /// header's words 1-3.
    fn decode(&self, b: &mut KernelBuilder, h: [Reg<U32>; 4]) -> (Reg<U32>, Reg<U32>) {
        let s3_hi = b.shr(h[3], 4u32);
        let pair = |b: &mut KernelBuilder, x_low: Reg<U32>, x_high: Reg<U32>, y: Reg<U32>| {
            let x = b.selp(x_high, x_low, self.high);
            let x = b.shr(x, self.sh);
            let x = b.and(x, self.lo);
            let y = b.shr(y, self.sh2);
            let y = b.and(y, self.top);
            b.or(x, y)
        };
        (pair(b, h[1], h[3], h[1]), pair(b, h[2], s3_hi, h[2]))
    }
}

/// [`LaneScales`]' masks of the low bits (six, or four) and of the top two bits (none,
/// or bits 4-5), for sub-blocks 0-3 and 4-7, two bytes at a time.
const LOW_MASK: [u32; 2] = [0x3F3F, 0x0F0F];
const TOP_MASK: [u32; 2] = [0, 0x3030];

/// Byte `i` (0 or 1) of `w` as an s32.
fn byte_s32(b: &mut KernelBuilder, w: Reg<U32>, i: u32) -> Reg<S32> {
    let v = b.prmt(w, 0u32, 0x4440 | i);
    b.bitcast32::<S32, U32>(v)
}

/// The kernel for `format` (Q4_K or Q5_K).
fn build(name: String, format: QuantFormat, tw: TileWarps) -> KernelIr {
    let five_bit = format == QuantFormat::Q5K;
    let (bb, qs_at) = qgemv_k::layout(five_bit);
    let (warps, threads) = (tw.warps(), tw.threads());
    let residency = (threads, tw.min_blocks(format));
    let (mut b, p, tl) = TileLane::begin(name, residency, bb, TileRows::Adjacent);
    let TileLane {
        warp, g, t, heads, ..
    } = tl;
    let q_off = b.mad(t, 32u32, qs_at);
    let q_off = b.cvt::<U64, U32>(q_off, None);
    // B: the lane's activations of sub-block g, kept in the run that is sub-block g.
    let two_t = b.shl(t, 1u32);
    let in_first = b.setp::<U32>(Cmp::Eq, g, two_t);
    let two_t1 = b.add(two_t, 1u32);
    let in_second = b.setp::<U32>(Cmp::Eq, g, two_t1);
    let masks = [in_first, in_second].map(|p| b.selp(u32::MAX, 0u32, p));
    let act_off = b.shl(g, 5u32);
    let sums_off = b.shl(t, 2u32);
    let scales = LaneScales::new(&mut b, t);
    // Q5_K: the masks of the lane's fifth bits in place, bit 2t of each byte (sub-block
    // 2t) and bit 2t + 1 (sub-block 2t + 1).
    let fifth = five_bit.then(|| {
        let ones = b.mov(0x0101_0101u32);
        let low = b.shl(ones, two_t);
        [low, b.shl(low, 1u32)]
    });
    let acc = [b.mov(0.0f32), b.mov(0.0f32)];
    let pass = |b: &mut KernelBuilder, sb: Reg<U32>, wait: PassWait| {
        let wo = b.mul_wide(sb, bb);
        let blk = heads.map(|h| b.add(h, wo));
        let quants = blk.map(|h| {
            let q = b.add(h, q_off);
            [0, 16].map(|o| b.ld_vec::<U32, U64, 4>(Space::Global, q, o))
        });
        let head = blk.map(|h| b.ld_vec::<U32, U64, 4>(Space::Global, h, 0));
        let high_bits = five_bit.then(|| {
            blk.map(|h| {
                let q = b.add(h, QH_AT);
                [0, 16].map(|o| b.ld_vec::<U32, U64, 4>(Space::Global, q, o))
            })
        });
        let a = act_after_weights(b, &p, sb, act_off, wait);
        let xs = [0, 16].map(|o| b.ld_vec::<U32, U64, 4>(Space::Global, a, o));
        qgemv_k::end_block(b, (p.y, tl.pin_row), p.blocks, a, acc[0]);
        // The sums and scale after the pin (cache hits by then, as every warp of the
        // grid reads the same activations): before it they held registers past the
        // 64 that four blocks a multiprocessor allow, and ptxas spilled.
        let sp = sums_at(b, &p, sb, sums_off);
        let sums = b.ld_vec::<S32, U64, 4>(Space::Global, sp, 0);
        let dx = scale_at(b, &p, sb);
        let mut c = [0i32; 4].map(|v| b.mov(v));
        // Q5_K's fifth bits' products, bit 2t or 2t + 1 in place (2^(2t) or 2^(2t + 1)
        // times theirs, exactly).
        let mut c5 = five_bit.then(|| [0i32; 4].map(|v| b.mov(v)));
        for e in 0..8 {
            let (v, i) = (e / 4, e % 4);
            let [r0, r1] = quants.map(|q| q[v][i]);
            let a = [
                b.and(r0, 0x0F0F_0F0Fu32),
                b.and(r1, 0x0F0F_0F0Fu32),
                b.and(r0, 0xF0F0_F0F0u32),
                b.and(r1, 0xF0F0_F0F0u32),
            ];
            let x = xs[v][i];
            let bf = masks.map(|m| b.and(x, m));
            c = b.mma_m16n8k32_u8s8(a, bf, c);
            if let (Some(qh), Some([low, high]), Some(acc5)) = (high_bits, fifth, c5) {
                let [h0, h1] = qh.map(|q| q[v][i]);
                let a = [
                    b.and(h0, low),
                    b.and(h1, low),
                    b.and(h0, high),
                    b.and(h1, high),
                ];
                c5 = Some(b.mma_m16n8k32_u8s8(a, bf, acc5));
            }
        }
        let s_lo = b.add(sums[0], sums[1]);
        let s_hi = b.add(sums[2], sums[3]);
        for (row, h) in head.into_iter().enumerate() {
            let (sc, mn) = scales.decode(b, h);
            let (c_lo, c_hi) = (c[2 * row], c[2 * row + 1]);
            // The high nibbles' products are 16 times theirs, exactly.
            let c_hi = b.shr(c_hi, 4u32);
            // Q5_K: plus 16 times the fifth bits' products, brought down to units.
            let (c_lo, c_hi) = match c5 {
                None => (c_lo, c_hi),
                Some(c5) => {
                    let lo = b.shr(c5[2 * row], two_t);
                    let lo = b.shl(lo, 4u32);
                    let hi = b.shr(c5[2 * row + 1], two_t1);
                    let hi = b.shl(hi, 4u32);
                    (b.add(c_lo, lo), b.add(c_hi, hi))
                }
            };
            let isum = byte_s32(b, sc, 0);
            let isum = b.mul(isum, c_lo);
            let sc1 = byte_s32(b, sc, 1);
            let isum = b.mad(sc1, c_hi, isum);
            let msum = byte_s32(b, mn, 0);
            let msum = b.mul(msum, s_lo);
            let mn1 = byte_s32(b, mn, 1);
            let msum = b.mad(mn1, s_hi, msum);
            let d = half_of(b, h[0], false);
            let dmin = half_of(b, h[0], true);
            let is = b.cvt::<F32, S32>(isum, Some(Rounding::Rn));
            let ms = b.cvt::<F32, S32>(msum, Some(Rounding::Rn));
            let scaled = b.mul(d, is);
            let neg_dmin = b.neg(dmin);
            let part = b.fma(neg_dmin, ms, scaled);
            let next = b.fma(dx, part, acc[row]);
            b.assign(acc[row], next);
        }
    };
    tile_passes(&mut b, warp, warps, p.blocks, pass);
    tl.store(&mut b, &p, warps, acc);
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_takes_sixteen_rows_of_whole_super_blocks() {
        let k = QgemvQ8kMmaOneKernel(QuantFormat::Q4K, TileWarps::Eight);
        let cfg = k.launch_config(&[33, 512]).unwrap();
        assert_eq!((cfg.grid.0, cfg.block.0), (3, 256));
        let k16 = QgemvQ8kMmaOneKernel(QuantFormat::Q5K, TileWarps::Sixteen);
        assert_eq!(k16.launch_config(&[33, 512]).unwrap().block.0, 512);
        assert!(k.launch_config(&[16, 500]).is_err());
        assert!(k.launch_config(&[16]).is_err());
        // A format without the kernel is an error, not a launch.
        let q6 = QgemvQ8kMmaOneKernel(QuantFormat::Q6K, TileWarps::Eight);
        assert!(q6.launch_config(&[16, 512]).is_err());
    }

    #[test]
    fn the_lanes_scale_decode_is_ggmls_two_at_a_time() {
        // The derivation `LaneScales` emits (its masks, its shifts) on the host, against
        // GGML's get_scale_min_k4 for every lane t and sub-block, over scale bytes that
        // set every bit somewhere. The emitted IR itself is checked on the GPU against
        // the dequantized reference (tests/gpu_qgemv_q8k.rs).
        let q: [u8; 12] = [
            0xC5, 0x7A, 0x3F, 0xE1, 0x96, 0x2B, 0xF0, 0x4D, 0xA3, 0x5E, 0x17, 0xD8,
        ];
        let word =
            |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
        let (s1, s2, s3) = (word(0), word(1), word(2));
        for t in 0..4u32 {
            let high = t >= 2;
            let sh = 16 * (t & 1);
            let (lo, top) = (LOW_MASK[high as usize], TOP_MASK[high as usize]);
            let pair = |x: u32, y: u32| ((x >> sh) & lo) | ((y >> (sh + 2)) & top);
            let sc = pair(if high { s3 } else { s1 }, s1);
            let mn = pair(if high { s3 >> 4 } else { s2 }, s2);
            for i in 0..2 {
                let j = (2 * t + i) as usize;
                let (want_sc, want_m) = if j < 4 {
                    (q[j] & 63, q[j + 4] & 63)
                } else {
                    (
                        (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
                        (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
                    )
                };
                assert_eq!((sc >> (8 * i)) & 0xFF, u32::from(want_sc), "scale {j}");
                assert_eq!((mn >> (8 * i)) & 0xFF, u32::from(want_m), "min {j}");
            }
        }
    }
}

//! Other data read between timed calls, so that the next call takes its operands from
//! memory rather than from the caches the previous call left them in: as a model's
//! layers find their weights when the others ran in between.

/// `MiB` of other data; [`OtherData::read`] reads all of it (nothing for 0 MiB).
pub struct OtherData(Vec<f32>);

impl OtherData {
    /// `mib` MiB of ones.
    ///
    /// ```
    /// let other = trueno_bench::evict::OtherData::mib(1);
    /// other.read();
    /// ```
    pub fn mib(mib: usize) -> Self {
        OtherData(vec![1.0; mib << 18])
    }

    /// The MiB that environment variable `var` names (0 where unset or not a number).
    pub fn from_env(var: &str) -> Self {
        let mib = std::env::var(var).ok().and_then(|v| v.parse().ok());
        OtherData::mib(mib.unwrap_or(0))
    }

    /// Reads every float once (a sum the optimiser must keep).
    pub fn read(&self) {
        if !self.0.is_empty() {
            std::hint::black_box(self.0.iter().sum::<f32>());
        }
    }
}

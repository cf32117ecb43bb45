//! Opening a GPU: adapter choice, the device and queue, and the device-wide error state that
//! turns wgpu's asynchronous error reports into `Result`s.

use std::sync::{Arc, Mutex};

use crate::error::{GpuError, Result};
use crate::kernels::PipelineCache;

/// Environment variable that picks the adapter whose name contains it (case-insensitive).
pub const ADAPTER_ENV: &str = "TRUENO_WGPU_ADAPTER";

/// What `trueno info` shows about the adapter in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    /// The adapter's name ("NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.7, 256 bits)").
    pub name: String,
    /// The graphics API wgpu drives it through ("Vulkan", "Metal", "Dx12", "BrowserWebGpu").
    pub backend: String,
    /// Discrete, integrated, virtual, CPU or other.
    pub device_type: String,
    /// Driver name and version, as the driver reports them.
    pub driver: String,
    /// The largest storage buffer one binding may hold on this device, in bytes.
    pub max_binding_bytes: u64,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {}; driver {}; {} MiB per binding)",
            self.name,
            self.backend,
            self.device_type,
            self.driver,
            self.max_binding_bytes >> 20
        )
    }
}

/// The first device error since the last check, and whether the device is gone.
#[derive(Default)]
pub(crate) struct DeviceState {
    pub(crate) error: Option<GpuError>,
    pub(crate) lost: Option<String>,
}

/// One GPU: a wgpu device and queue, its compiled pipelines, and its error state. Cheap to
/// share by reference; every op goes through a [`crate::Batch`] made by [`Gpu::batch`].
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) pipelines: PipelineCache,
    pub(crate) state: Arc<Mutex<DeviceState>>,
    info: AdapterSummary,
}

impl Gpu {
    /// Opens the preferred adapter: the one named by `TRUENO_WGPU_ADAPTER` if set, else the
    /// high-performance one (a discrete GPU before an integrated one before a CPU driver).
    ///
    /// ```no_run
    /// let gpu = trueno_wgpu::Gpu::new()?;
    /// println!("{}", gpu.info());
    /// # Ok::<(), trueno_wgpu::GpuError>(())
    /// ```
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<Gpu> {
        pollster::block_on(Gpu::new_async())
    }

    /// [`Gpu::new`] as a future (the only form in a browser, where nothing may block).
    pub async fn new_async() -> Result<Gpu> {
        let wanted = std::env::var(ADAPTER_ENV).ok().filter(|s| !s.is_empty());
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = match &wanted {
            Some(w) => {
                let all = instance.enumerate_adapters(wgpu::Backends::all()).await;
                let names: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
                let pick = all
                    .into_iter()
                    .find(|a| a.get_info().name.to_lowercase().contains(&w.to_lowercase()));
                pick.ok_or_else(|| GpuError::NoAdapter {
                    wanted: Some(w.clone()),
                    found: found_list(&names),
                })?
            }
            None => instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    ..Default::default()
                })
                .await
                .map_err(|e| GpuError::NoAdapter {
                    wanted: None,
                    found: format!(
                        "{e} (on Linux without a GPU, Mesa's CPU driver works: \
                         apt install mesa-vulkan-drivers)"
                    ),
                })?,
        };
        Gpu::open(adapter).await
    }

    /// Opens a device on `adapter` with the adapter's own limits (wgpu's defaults cap a
    /// storage binding at 128 MiB, below what large tensors need).
    async fn open(adapter: wgpu::Adapter) -> Result<Gpu> {
        let ai = adapter.get_info();
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("trueno-wgpu"),
                required_features: wgpu::Features::empty(),
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice {
                adapter: ai.name.clone(),
                reason: e.to_string(),
            })?;
        let state = Arc::new(Mutex::new(DeviceState::default()));
        let s = state.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut st = s.lock().unwrap_or_else(|p| p.into_inner());
            if st.error.is_none() {
                st.error = Some(match e {
                    wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
                    _ => GpuError::Validation(e.to_string()),
                });
            }
        }));
        let s = state.clone();
        device.set_device_lost_callback(move |reason, msg| {
            let mut st = s.lock().unwrap_or_else(|p| p.into_inner());
            st.lost = Some(format!("{reason:?}: {msg}"));
        });
        let info = AdapterSummary {
            name: ai.name,
            backend: format!("{:?}", ai.backend),
            device_type: format!("{:?}", ai.device_type),
            driver: format!("{} {}", ai.driver, ai.driver_info)
                .trim()
                .to_string(),
            max_binding_bytes: limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size),
        };
        Ok(Gpu {
            pipelines: PipelineCache::new(&device),
            device,
            queue,
            state,
            info,
        })
    }

    /// The adapter this device runs on.
    pub fn info(&self) -> &AdapterSummary {
        &self.info
    }

    /// Destroys the device: every later op fails with [`GpuError::DeviceLost`], as after a
    /// driver reset. For tests of that path, and to free device memory early.
    pub fn destroy(&self) {
        self.device.destroy();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.lost
            .get_or_insert_with(|| "destroyed by Gpu::destroy".into());
    }

    /// The first error the device reported since the last call, or a lost device. Errors
    /// are device-wide: with several threads on one `Gpu`, one may see another's error.
    pub(crate) fn take_error(&self) -> Result<()> {
        if self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .error
            .is_some()
        {
            // Commands on a device that was just lost fail validation before the loss is
            // reported; a poll delivers the loss, which is then the error returned.
            let _ = self.device.poll(wgpu::PollType::Poll);
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = &st.lost {
            return Err(GpuError::DeviceLost(l.clone()));
        }
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fails early on a lost device (wgpu would otherwise accept the commands and drop them).
    pub(crate) fn check_alive(&self) -> Result<()> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.lost {
            Some(l) => Err(GpuError::DeviceLost(l.clone())),
            None => Ok(()),
        }
    }
}

fn found_list(names: &[String]) -> String {
    if names.is_empty() {
        "no adapters at all".to_string()
    } else {
        format!("adapters present: {}", names.join(", "))
    }
}

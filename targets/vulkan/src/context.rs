//! The Vulkan instance, the chosen physical device, its logical device and compute queue:
//! everything a device needs before it sees a plan, destroyed in `Drop`.

use crate::error::VulkanError;
use ash::vk;
use std::ffi::{c_void, CStr};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The validation layer's errors and warnings, shared so they can be read after the device is
/// gone (leaked objects are reported when the device and instance are destroyed).
#[derive(Clone, Debug, Default)]
pub struct ValidationLog(Arc<Mutex<Vec<String>>>);

impl ValidationLog {
    /// Every message so far.
    pub fn messages(&self) -> Vec<String> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

/// What `ferrite devices` shows about one Vulkan physical device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Position in the loader's enumeration (`vulkan:N`).
    pub index: usize,
    /// The device's name.
    pub name: String,
    /// `discrete`, `integrated`, `virtual`, `cpu` or `other`.
    pub kind: &'static str,
    /// Driver name and version string (Vulkan 1.2 drivers), else the raw driver version.
    pub driver: String,
    /// Vulkan API version the device supports, `major.minor.patch`.
    pub api_version: String,
    /// Size of the largest device-local memory heap, in bytes.
    pub memory_bytes: u64,
    /// Largest storage buffer a shader may bind, in bytes (bounds the arena and the weights).
    pub max_storage_buffer_bytes: u64,
    /// Whether it has a queue family with compute.
    pub has_compute: bool,
}

/// Opens the Vulkan loader: the system's, or the library at `path`.
pub(crate) fn load_entry(path: Option<&Path>) -> Result<ash::Entry, VulkanError> {
    // SAFETY: loading the Vulkan loader runs its initialisers; it is a well-known system library
    // (or one the caller names on purpose).
    let entry = unsafe {
        match path {
            Some(p) => ash::Entry::load_from(p),
            None => ash::Entry::load(),
        }
    };
    entry.map_err(|e| VulkanError::NoLoader(e.to_string()))
}

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// An instance with, optionally, the validation layer and a messenger that records its errors.
pub(crate) struct Instance {
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Validation errors reported so far (the messenger holds the mutex's address, which the
    /// `Arc` keeps fixed and alive until after the messenger is destroyed).
    messages: ValidationLog,
}

/// Records validation-layer errors and warnings.
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    let serious = vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
        | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING;
    if severity.intersects(serious) && !user.is_null() && !data.is_null() {
        // SAFETY: `user` is the `Mutex` in `Instance`'s log, alive while the messenger exists;
        // `data` is valid for the duration of the callback.
        let (messages, data) = unsafe { (&*(user as *const Mutex<Vec<String>>), &*data) };
        // SAFETY: the layer passes a NUL-terminated message (or null).
        let text = unsafe { data.message_as_c_str() }
            .map(|m| m.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Ok(mut list) = messages.lock() {
            list.push(format!("{severity:?}: {text}"));
        }
    }
    vk::FALSE
}

impl Instance {
    /// Creates an instance (Vulkan 1.1), with the validation layer when `validation` is set and
    /// the layer is installed.
    pub fn new(loader: Option<&Path>, validation: bool) -> Result<Instance, VulkanError> {
        let entry = load_entry(loader)?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"ferrite")
            .engine_name(c"ferrite")
            .api_version(vk::API_VERSION_1_1);
        // SAFETY: plain queries on a loaded entry.
        let has_layer = validation
            && unsafe { entry.enumerate_instance_layer_properties() }
                .map_err(VulkanError::api("vkEnumerateInstanceLayerProperties"))?
                .iter()
                .any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER));
        let layers = if has_layer {
            vec![VALIDATION_LAYER.as_ptr()]
        } else {
            vec![]
        };
        let extensions = if has_layer {
            vec![ash::ext::debug_utils::NAME.as_ptr()]
        } else {
            vec![]
        };
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        // SAFETY: `info` and everything it points to outlive the call.
        let instance = unsafe { entry.create_instance(&info, None) }.map_err(|e| match e {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => VulkanError::NoDriver,
            e => VulkanError::api("vkCreateInstance")(e),
        })?;
        let messages = ValidationLog::default();
        let mut this = Instance {
            entry,
            instance,
            debug: None,
            messages,
        };
        if has_layer {
            let debug = ash::ext::debug_utils::Instance::new(&this.entry, &this.instance);
            let user = Arc::as_ptr(&this.messages.0) as *mut c_void;
            let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                        | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(on_message))
                .user_data(user);
            // SAFETY: the callback's user data (the log's mutex) outlives the messenger, which
            // `Drop` destroys while this instance still holds the log.
            let messenger = unsafe { debug.create_debug_utils_messenger(&info, None) }
                .map_err(VulkanError::api("vkCreateDebugUtilsMessengerEXT"))?;
            this.debug = Some((debug, messenger));
        }
        Ok(this)
    }

    /// Whether the validation layer is active.
    pub fn validating(&self) -> bool {
        self.debug.is_some()
    }

    /// The validation log (messages so far and any reported later).
    pub fn log(&self) -> ValidationLog {
        self.messages.clone()
    }

    /// The physical devices, in the loader's order.
    pub fn physical_devices(&self) -> Result<Vec<vk::PhysicalDevice>, VulkanError> {
        // SAFETY: a query on a live instance.
        unsafe { self.instance.enumerate_physical_devices() }
            .map_err(VulkanError::api("vkEnumeratePhysicalDevices"))
    }

    /// The queue family with compute support, preferring a compute-only one.
    pub fn compute_family(&self, physical: vk::PhysicalDevice) -> Option<u32> {
        // SAFETY: a query on a live instance and one of its physical devices.
        let families = unsafe {
            self.instance
                .get_physical_device_queue_family_properties(physical)
        };
        let compute = |f: &vk::QueueFamilyProperties| {
            f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0
        };
        let dedicated = families
            .iter()
            .position(|f| compute(f) && !f.queue_flags.contains(vk::QueueFlags::GRAPHICS));
        dedicated
            .or_else(|| families.iter().position(compute))
            .map(|i| i as u32)
    }

    /// Describes a physical device.
    pub fn describe(&self, index: usize, physical: vk::PhysicalDevice) -> DeviceInfo {
        let i = &self.instance;
        // SAFETY: queries on a live instance and one of its physical devices.
        let props = unsafe { i.get_physical_device_properties(physical) };
        // SAFETY: as above.
        let memory = unsafe { i.get_physical_device_memory_properties(physical) };
        let mut driver = format!("driver version {:#x}", props.driver_version);
        if props.api_version >= vk::API_VERSION_1_2 {
            let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver_props);
            // SAFETY: the device supports 1.2, so the driver-properties struct is known to it.
            unsafe { i.get_physical_device_properties2(physical, &mut props2) };
            let name = driver_props.driver_name_as_c_str().unwrap_or_default();
            let info = driver_props.driver_info_as_c_str().unwrap_or_default();
            driver = format!("{} {}", name.to_string_lossy(), info.to_string_lossy());
        }
        let heaps = &memory.memory_heaps[..memory.memory_heap_count as usize];
        let memory_bytes = heaps
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max()
            .unwrap_or(0);
        let v = props.api_version;
        DeviceInfo {
            index,
            name: props
                .device_name_as_c_str()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind: match props.device_type {
                vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
                vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
                vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
                vk::PhysicalDeviceType::CPU => "cpu",
                _ => "other",
            },
            driver: driver.trim().to_string(),
            api_version: format!(
                "{}.{}.{}",
                vk::api_version_major(v),
                vk::api_version_minor(v),
                vk::api_version_patch(v)
            ),
            memory_bytes,
            max_storage_buffer_bytes: props.limits.max_storage_buffer_range as u64,
            has_compute: self.compute_family(physical).is_some(),
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every object created from this instance (the logical device, the messenger)
        // is destroyed before it; `Context` drops its device first.
        unsafe {
            if let Some((debug, messenger)) = self.debug.take() {
                debug.destroy_debug_utils_messenger(messenger, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

/// A logical device with one compute queue, shared by the device and its programs.
pub(crate) struct Context {
    pub device: ash::Device,
    pub queue: vk::Queue,
    pub queue_family: u32,
    /// Valid bits of the queue's timestamps (0: no timestamps).
    pub timestamp_bits: u32,
    pub memory: vk::PhysicalDeviceMemoryProperties,
    pub limits: vk::PhysicalDeviceLimits,
    pub info: DeviceInfo,
    /// Declared last: dropped after the device.
    pub instance: Instance,
}

impl Context {
    /// Opens physical device `index`.
    pub fn new(instance: Instance, index: usize) -> Result<Context, VulkanError> {
        let physical = instance.physical_devices()?;
        let available = physical.len();
        let pd = *physical.get(index).ok_or(VulkanError::NoDevice {
            requested: index,
            available,
        })?;
        let info = instance.describe(index, pd);
        let family = instance
            .compute_family(pd)
            .ok_or_else(|| VulkanError::NoComputeQueue(info.name.clone()))?;
        // SAFETY: a query on a live instance and one of its physical devices.
        let timestamp_bits = unsafe {
            instance
                .instance
                .get_physical_device_queue_family_properties(pd)
        }
        .get(family as usize)
        .map_or(0, |f| f.timestamp_valid_bits);
        let priorities = [1.0f32];
        let queue_info = vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities);
        let create =
            vk::DeviceCreateInfo::default().queue_create_infos(std::slice::from_ref(&queue_info));
        // SAFETY: `create` and what it points to outlive the call; `pd` belongs to `instance`.
        let device = unsafe { instance.instance.create_device(pd, &create, None) }
            .map_err(VulkanError::api("vkCreateDevice"))?;
        // SAFETY: the family was requested with one queue.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: queries on a live instance.
        let (memory, props) = unsafe {
            (
                instance.instance.get_physical_device_memory_properties(pd),
                instance.instance.get_physical_device_properties(pd),
            )
        };
        Ok(Context {
            device,
            queue,
            queue_family: family,
            timestamp_bits,
            memory,
            limits: props.limits,
            info,
            instance,
        })
    }

    /// A memory type allowed by `bits` with all of `want`, trying each preference in turn.
    pub fn memory_type(&self, bits: u32, preferences: &[vk::MemoryPropertyFlags]) -> Option<u32> {
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        preferences.iter().find_map(|want| {
            types
                .iter()
                .enumerate()
                .find(|(i, t)| bits & (1 << i) != 0 && t.property_flags.contains(*want))
                .map(|(i, _)| i as u32)
        })
    }

    /// The size of the heap behind memory type `index`.
    pub fn heap_size(&self, memory_type: u32) -> u64 {
        let heap = self.memory.memory_types[memory_type as usize].heap_index;
        self.memory.memory_heaps[heap as usize].size
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: programs hold an `Arc<Context>`, so every object made from this device is gone.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
        }
    }
}

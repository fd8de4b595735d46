//! A buffer with its own memory allocation: device-local for the arena and the weights,
//! host-visible (persistently mapped) for staging and the status word.

use crate::context::Context;
use crate::error::VulkanError;
use ash::vk;
use std::sync::Arc;

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memory {
    /// Fastest for the GPU; not mapped.
    Device,
    /// Mapped for the host (coherent, cached when available).
    Host,
}

/// A `VkBuffer` bound to a dedicated allocation.
pub(crate) struct Buffer {
    ctx: Arc<Context>,
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    /// Size in bytes.
    pub size: u64,
    mapped: *mut u8,
}

// SAFETY: the mapping is owned by this buffer alone and only touched through `&mut self` or
// `&self` reads that the owner serialises with the GPU's fence.
unsafe impl Send for Buffer {}

impl Buffer {
    /// Creates a buffer of at least `size` bytes (rounded up to 4, at least 16) for `usage`.
    pub fn new(
        ctx: &Arc<Context>,
        what: &'static str,
        size: u64,
        usage: vk::BufferUsageFlags,
        memory: Memory,
    ) -> Result<Buffer, VulkanError> {
        let size = size.max(16).div_ceil(4) * 4;
        if usage.contains(vk::BufferUsageFlags::STORAGE_BUFFER)
            && size > ctx.limits.max_storage_buffer_range as u64
        {
            return Err(VulkanError::TooLarge {
                what,
                bytes: size,
                max: ctx.limits.max_storage_buffer_range as u64,
            });
        }
        let d = &ctx.device;
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a valid create info on a live device.
        let buffer =
            unsafe { d.create_buffer(&info, None) }.map_err(VulkanError::api("vkCreateBuffer"))?;
        let mut this = Buffer {
            ctx: ctx.clone(),
            buffer,
            memory: vk::DeviceMemory::null(),
            size,
            mapped: std::ptr::null_mut(),
        };
        // SAFETY: `buffer` is live.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        use vk::MemoryPropertyFlags as F;
        let preferences: &[F] = match memory {
            Memory::Device => &[F::DEVICE_LOCAL, F::empty()],
            Memory::Host => &[
                F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED,
                F::HOST_VISIBLE | F::HOST_COHERENT,
            ],
        };
        let type_index = ctx
            .memory_type(req.memory_type_bits, preferences)
            .ok_or(VulkanError::NoMemoryType(what))?;
        let heap = ctx.heap_size(type_index);
        if req.size > heap {
            return Err(VulkanError::TooLarge {
                what,
                bytes: req.size,
                max: heap,
            });
        }
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index);
        // SAFETY: a valid allocation info on a live device.
        this.memory = unsafe { d.allocate_memory(&alloc, None) }
            .map_err(VulkanError::api("vkAllocateMemory"))?;
        // SAFETY: fresh buffer and memory of a sufficient size and a compatible type.
        unsafe { d.bind_buffer_memory(buffer, this.memory, 0) }
            .map_err(VulkanError::api("vkBindBufferMemory"))?;
        if memory == Memory::Host {
            // SAFETY: host-visible memory, mapped once for the buffer's lifetime.
            let ptr = unsafe {
                d.map_memory(this.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            }
            .map_err(VulkanError::api("vkMapMemory"))?;
            this.mapped = ptr.cast();
        }
        Ok(this)
    }

    /// The mapped bytes of a host buffer (empty for a device buffer).
    pub fn bytes(&self) -> &[u8] {
        if self.mapped.is_null() {
            return &[];
        }
        // SAFETY: the mapping covers `size` bytes and lives as long as `self`; callers only read
        // it while the GPU is idle (after the fence).
        unsafe { std::slice::from_raw_parts(self.mapped, self.size as usize) }
    }

    /// The mapped bytes of a host buffer, writable (empty for a device buffer).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        if self.mapped.is_null() {
            return &mut [];
        }
        // SAFETY: as in `bytes`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.mapped, self.size as usize) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let d = &self.ctx.device;
        // SAFETY: the owner waits for the GPU before dropping its buffers.
        unsafe {
            if !self.mapped.is_null() {
                d.unmap_memory(self.memory);
            }
            d.destroy_buffer(self.buffer, None);
            if self.memory != vk::DeviceMemory::null() {
                d.free_memory(self.memory, None);
            }
        }
    }
}

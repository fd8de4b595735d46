//! A prepared plan on the GPU: buffers, pipelines, one descriptor set and the whole plan
//! recorded once into a command buffer. A run writes the inputs into the staging buffer, submits
//! the recorded commands, waits on a fence and reads the outputs back; nothing is created per run.

use crate::buffer::{Buffer, Memory};
use crate::context::Context;
use crate::encode::{encode, Command};
use crate::error::VulkanError;
use crate::shaders::Kernel;
use ash::vk;
use ferrite_hal::{Location, Plan, TensorDesc, TensorList};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// How long session creation waits for the one-time upload of weights and parameters.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Counts describing what a prepared program does per run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramStats {
    /// Compute dispatches.
    pub dispatches: usize,
    /// Buffer copies inside the plan (Copy steps).
    pub copies: usize,
    /// Pipeline barriers between steps (only where a step depends on an earlier write).
    pub barriers: usize,
    /// Distinct compute pipelines.
    pub pipelines: usize,
    /// Bytes of parameter words uploaded.
    pub params_bytes: usize,
}

/// GPU time of the last run, from timestamps written into the command buffer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuTiming {
    /// From the first command (input copies) to the last (output copies), in microseconds.
    pub total_us: f64,
    /// Copying the inputs in, in microseconds.
    pub inputs_us: f64,
    /// Each step, in plan order, in microseconds.
    pub steps_us: Vec<f64>,
    /// Copying the outputs out, in microseconds.
    pub outputs_us: f64,
}

/// Which GPU timestamps a program records (each one costs a little GPU time, so none by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timing {
    /// No timestamps.
    #[default]
    Off,
    /// The whole run: [`GpuTiming::total_us`].
    Total,
    /// The whole run, the input and output copies and every step.
    PerStep,
}

/// One input or output region: arena offset, staging offset, length.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    arena: usize,
    staging: usize,
    bytes: usize,
}

/// One encoded step with the arena bytes it reads and writes.
struct EncodedStep {
    commands: Vec<(Command, u32)>,
    reads: Vec<Range<usize>>,
    writes: Vec<Range<usize>>,
}

/// A plan prepared on a Vulkan device.
pub struct Program {
    ctx: Arc<Context>,
    modules: Vec<vk::ShaderModule>,
    pipelines: BTreeMap<Kernel, vk::Pipeline>,
    set_layout: vk::DescriptorSetLayout,
    pipeline_layout: vk::PipelineLayout,
    descriptor_pool: vk::DescriptorPool,
    command_pool: vk::CommandPool,
    command_buffer: vk::CommandBuffer,
    fence: vk::Fence,
    /// Timestamps: start, after inputs, after each step, after outputs (null: unsupported).
    queries: vk::QueryPool,
    query_count: u32,
    /// Timestamps between steps, not just around the run.
    per_step: bool,
    ticks: Vec<u64>,
    timing: Option<GpuTiming>,
    arena: Buffer,
    weights: Buffer,
    params: Buffer,
    status: Buffer,
    staging: Buffer,
    inputs: Vec<Transfer>,
    outputs: Vec<Transfer>,
    arena_bytes: usize,
    /// The wait limit of the current submission.
    timeout: Duration,
    /// A submission timed out and may still be running.
    in_flight: bool,
    stats: ProgramStats,
}

fn arena_range(t: &TensorDesc) -> Option<Range<usize>> {
    match t.location {
        Location::Arena(o) if t.bytes > 0 => Some(o..o + t.bytes),
        _ => None,
    }
}

fn ranges(list: &TensorList<'_>) -> Vec<Range<usize>> {
    list.iter()
        .flatten()
        .filter_map(|t| arena_range(&t))
        .collect()
}

fn overlaps(a: &[Range<usize>], b: &[Range<usize>]) -> bool {
    a.iter()
        .any(|x| b.iter().any(|y| x.start < y.end && y.start < x.end))
}

/// Places graph inputs then outputs one after another in the staging buffer.
fn transfers(list: &TensorList<'_>, staging: &mut usize) -> Result<Vec<Transfer>, VulkanError> {
    let mut out = Vec::new();
    for t in list.iter() {
        let t = t.ok_or(VulkanError::CorruptPlan("missing graph input or output"))?;
        let Location::Arena(arena) = t.location else {
            return Err(VulkanError::CorruptPlan(
                "graph input or output outside the arena",
            ));
        };
        out.push(Transfer {
            arena,
            staging: *staging,
            bytes: t.bytes,
        });
        *staging += t.bytes.div_ceil(16) * 16;
    }
    Ok(out)
}

impl Program {
    /// Prepares `plan`: encodes every step, uploads weights and parameters, builds pipelines
    /// and records the command buffer.
    pub(crate) fn new(
        ctx: &Arc<Context>,
        plan: &dyn Plan,
        timing: Timing,
    ) -> Result<Program, VulkanError> {
        // Encode every step and give each dispatch its slice of the parameter buffer.
        let mut steps = Vec::with_capacity(plan.len());
        let mut params: Vec<u32> = Vec::new();
        let mut kernels = BTreeMap::new();
        for index in 0..plan.len() {
            let step = plan
                .step(index)
                .ok_or(VulkanError::CorruptPlan("missing step"))?;
            let refuse = |why| VulkanError::Unsupported {
                step: index,
                op: step.op.kind().name(),
                why,
            };
            let commands = encode(&step).map_err(refuse)?;
            let mut placed = Vec::with_capacity(commands.len());
            for command in commands {
                let base =
                    u32::try_from(params.len()).map_err(|_| refuse("too many parameters"))?;
                if let Command::Dispatch {
                    kernel, params: p, ..
                } = &command
                {
                    params.extend_from_slice(p);
                    kernels.insert(*kernel, vk::Pipeline::null());
                }
                placed.push((command, base));
            }
            let mut writes = ranges(&step.outputs);
            writes.extend(step.scratch.as_ref().and_then(arena_range));
            steps.push(EncodedStep {
                commands: placed,
                reads: ranges(&step.inputs),
                writes,
            });
        }

        let mut staging_bytes = 0;
        let inputs = transfers(&plan.inputs(), &mut staging_bytes)?;
        let outputs = transfers(&plan.outputs(), &mut staging_bytes)?;

        use vk::BufferUsageFlags as U;
        let storage = U::STORAGE_BUFFER | U::TRANSFER_DST | U::TRANSFER_SRC;
        let arena_bytes = plan.arena_bytes();
        let arena = Buffer::new(ctx, "arena", arena_bytes as u64, storage, Memory::Device)?;
        let weights = Buffer::new(
            ctx,
            "weights",
            plan.weights().len() as u64,
            storage,
            Memory::Device,
        )?;
        let params_buffer = Buffer::new(
            ctx,
            "parameter buffer",
            params.len() as u64 * 4,
            storage,
            Memory::Device,
        )?;
        let status = Buffer::new(ctx, "status word", 16, storage, Memory::Host)?;
        let staging = Buffer::new(
            ctx,
            "staging buffer",
            staging_bytes as u64,
            U::TRANSFER_SRC | U::TRANSFER_DST,
            Memory::Host,
        )?;

        let mut program = Program {
            ctx: ctx.clone(),
            modules: Vec::new(),
            pipelines: BTreeMap::new(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            descriptor_pool: vk::DescriptorPool::null(),
            command_pool: vk::CommandPool::null(),
            command_buffer: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            queries: vk::QueryPool::null(),
            query_count: 0,
            per_step: timing == Timing::PerStep,
            ticks: Vec::new(),
            timing: None,
            arena,
            weights,
            params: params_buffer,
            status,
            staging,
            inputs,
            outputs,
            arena_bytes,
            timeout: UPLOAD_TIMEOUT,
            in_flight: false,
            stats: ProgramStats {
                params_bytes: params.len() * 4,
                ..ProgramStats::default()
            },
        };
        if timing != Timing::Off && ctx.timestamp_bits > 0 {
            let count = if program.per_step { steps.len() + 3 } else { 2 };
            program.query_count = count as u32;
            program.ticks = vec![0; count];
        }
        // From here on, `Drop` destroys whatever has been created if a step fails.
        program.create_sync()?;
        let param_bytes: Vec<u8> = params.iter().flat_map(|w| w.to_le_bytes()).collect();
        program.upload(plan.weights(), &param_bytes)?;
        program.create_layout()?;
        program.create_pipelines(kernels.into_keys())?;
        program.record(&steps)?;
        Ok(program)
    }

    /// What the recorded plan does per run.
    pub fn stats(&self) -> ProgramStats {
        self.stats
    }

    /// GPU time of the last successful run (`None` before a run, or when the queue has no
    /// timestamps).
    pub fn last_timing(&self) -> Option<&GpuTiming> {
        self.timing.as_ref()
    }

    /// Converts the last run's timestamps into a [`GpuTiming`].
    fn read_timing(&mut self) -> Result<(), VulkanError> {
        if self.queries == vk::QueryPool::null() {
            return Ok(());
        }
        // SAFETY: the run finished (fence), so every query in the pool is available.
        unsafe {
            self.ctx.device.get_query_pool_results(
                self.queries,
                0,
                &mut self.ticks,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(VulkanError::api("vkGetQueryPoolResults"))?;
        let bits = self.ctx.timestamp_bits;
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let period_us = self.ctx.limits.timestamp_period as f64 / 1000.0;
        let span = |a: u64, b: u64| (b.wrapping_sub(a) & mask) as f64 * period_us;
        let t = &self.ticks;
        let last = t.len() - 1;
        let timing = self.timing.get_or_insert_with(GpuTiming::default);
        timing.total_us = span(t[0], t[last]);
        if self.per_step {
            timing.inputs_us = span(t[0], t[1]);
            timing.outputs_us = span(t[last - 1], t[last]);
            timing.steps_us.clear();
            timing
                .steps_us
                .extend(t[1..last].windows(2).map(|w| span(w[0], w[1])));
        }
        Ok(())
    }

    fn create_sync(&mut self) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(self.ctx.queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create infos on a live device; handles are stored for `Drop`.
        unsafe {
            self.command_pool = d
                .create_command_pool(&info, None)
                .map_err(VulkanError::api("vkCreateCommandPool"))?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(self.command_pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            self.command_buffer = d
                .allocate_command_buffers(&alloc)
                .map_err(VulkanError::api("vkAllocateCommandBuffers"))?[0];
            self.fence = d
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(VulkanError::api("vkCreateFence"))?;
            if self.query_count > 0 {
                let info = vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(self.query_count);
                self.queries = d
                    .create_query_pool(&info, None)
                    .map_err(VulkanError::api("vkCreateQueryPool"))?;
            }
        }
        Ok(())
    }

    /// Copies the weights and parameter words into their device buffers, once.
    fn upload(&mut self, weights: &[u8], params: &[u8]) -> Result<(), VulkanError> {
        let total = weights.len() + params.len();
        if total == 0 {
            return Ok(());
        }
        let mut upload = Buffer::new(
            &self.ctx,
            "upload buffer",
            total as u64,
            vk::BufferUsageFlags::TRANSFER_SRC,
            Memory::Host,
        )?;
        let bytes = upload.bytes_mut();
        bytes[..weights.len()].copy_from_slice(weights);
        bytes[weights.len()..total].copy_from_slice(params);
        let ctx = self.ctx.clone();
        let d = &ctx.device;
        let cmd = self.command_buffer;
        // SAFETY: the command buffer is idle (fresh); buffers are live and large enough.
        unsafe {
            d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
                .map_err(VulkanError::api("vkBeginCommandBuffer"))?;
            if !weights.is_empty() {
                let region = vk::BufferCopy::default().size(weights.len() as u64);
                d.cmd_copy_buffer(cmd, upload.buffer, self.weights.buffer, &[region]);
            }
            if !params.is_empty() {
                let region = vk::BufferCopy::default()
                    .src_offset(weights.len() as u64)
                    .size(params.len() as u64);
                d.cmd_copy_buffer(cmd, upload.buffer, self.params.buffer, &[region]);
            }
            d.end_command_buffer(cmd)
                .map_err(VulkanError::api("vkEndCommandBuffer"))?;
        }
        self.submit_and_wait()?;
        // SAFETY: the upload finished (fence waited); the buffer can be re-recorded.
        unsafe {
            d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .map_err(VulkanError::api("vkResetCommandBuffer"))?;
        }
        drop(upload);
        Ok(())
    }

    fn create_layout(&mut self) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        let bindings: Vec<_> = (0..4)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let push = vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4);
        let pool_size = vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(4);
        // SAFETY: valid create infos on a live device; handles are stored for `Drop`.
        unsafe {
            self.set_layout = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .map_err(VulkanError::api("vkCreateDescriptorSetLayout"))?;
            self.pipeline_layout = d
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(std::slice::from_ref(&self.set_layout))
                        .push_constant_ranges(std::slice::from_ref(&push)),
                    None,
                )
                .map_err(VulkanError::api("vkCreatePipelineLayout"))?;
            self.descriptor_pool = d
                .create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(1)
                        .pool_sizes(std::slice::from_ref(&pool_size)),
                    None,
                )
                .map_err(VulkanError::api("vkCreateDescriptorPool"))?;
        }
        Ok(())
    }

    fn descriptor_set(&self) -> Result<vk::DescriptorSet, VulkanError> {
        let d = &self.ctx.device;
        let alloc = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.descriptor_pool)
            .set_layouts(std::slice::from_ref(&self.set_layout));
        // SAFETY: the pool has room for exactly this set; it is freed with the pool.
        let set = unsafe { d.allocate_descriptor_sets(&alloc) }
            .map_err(VulkanError::api("vkAllocateDescriptorSets"))?[0];
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> =
            [&self.arena, &self.weights, &self.params, &self.status]
                .iter()
                .map(|b| {
                    [vk::DescriptorBufferInfo::default()
                        .buffer(b.buffer)
                        .range(vk::WHOLE_SIZE)]
                })
                .collect();
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        // SAFETY: every write names a live buffer and a binding of the set's layout.
        unsafe { d.update_descriptor_sets(&writes, &[]) };
        Ok(set)
    }

    fn create_pipelines(
        &mut self,
        kernels: impl Iterator<Item = Kernel>,
    ) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        let mut modules = BTreeMap::new();
        for kernel in kernels {
            let module = kernel.module();
            if let std::collections::btree_map::Entry::Vacant(slot) = modules.entry(module) {
                let words = ash::util::read_spv(&mut std::io::Cursor::new(module.spirv()))
                    .map_err(|_| VulkanError::CorruptPlan("embedded SPIR-V is malformed"))?;
                let info = vk::ShaderModuleCreateInfo::default().code(&words);
                // SAFETY: SPIR-V validated at build time; the handle is stored for `Drop`.
                let handle = unsafe { d.create_shader_module(&info, None) }
                    .map_err(VulkanError::api("vkCreateShaderModule"))?;
                self.modules.push(handle);
                slot.insert(handle);
            }
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(modules[&module])
                .name(kernel.entry());
            let info = vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(self.pipeline_layout);
            // SAFETY: a valid module, entry point and layout; the handle is stored for `Drop`.
            let pipeline =
                unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) }
                    .map_err(|(_, result)| VulkanError::Api {
                        call: "vkCreateComputePipelines",
                        result,
                    })?[0];
            self.pipelines.insert(kernel, pipeline);
        }
        self.stats.pipelines = self.pipelines.len();
        Ok(())
    }

    /// Records inputs in, every step with the barriers its dependencies need, outputs out.
    fn record(&mut self, steps: &[EncodedStep]) -> Result<(), VulkanError> {
        let set = self.descriptor_set()?;
        let d = &self.ctx.device;
        let cmd = self.command_buffer;
        let limits = self.ctx.limits.max_compute_work_group_count;
        let mut stats = self.stats;
        // SAFETY: recording into an idle command buffer; every handle is live and owned by
        // this program, every region lies inside its buffer (checked by the core's verifier).
        unsafe {
            d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
                .map_err(VulkanError::api("vkBeginCommandBuffer"))?;
            let queries = self.queries;
            let per_step = self.per_step;
            let mut query = 0;
            // Timestamps: the first and last always, the ones between steps when per step.
            let mut stamp = |stage, inner: bool| {
                if queries != vk::QueryPool::null() && (per_step || !inner) {
                    d.cmd_write_timestamp(cmd, stage, queries, query);
                    query += 1;
                }
            };
            if queries != vk::QueryPool::null() {
                d.cmd_reset_query_pool(cmd, queries, 0, self.query_count);
            }
            stamp(vk::PipelineStageFlags::TOP_OF_PIPE, false);
            d.cmd_fill_buffer(cmd, self.status.buffer, 0, vk::WHOLE_SIZE, 0);
            let buffers = [self.staging.buffer, self.arena.buffer];
            copy_transfers(d, cmd, &self.inputs, buffers, true);
            barrier(d, cmd);
            stamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE, true);
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.pipeline_layout,
                0,
                &[set],
                &[],
            );
            let mut written: Vec<Range<usize>> = Vec::new();
            let mut read: Vec<Range<usize>> = Vec::new();
            let mut bound = None;
            for step in steps {
                let hazard = overlaps(&step.reads, &written)
                    || overlaps(&step.writes, &written)
                    || overlaps(&step.writes, &read);
                if hazard {
                    barrier(d, cmd);
                    stats.barriers += 1;
                    written.clear();
                    read.clear();
                }
                written.extend(step.writes.iter().cloned());
                read.extend(step.reads.iter().cloned());
                for (command, base) in &step.commands {
                    match command {
                        Command::Dispatch { kernel, groups, .. } => {
                            if groups.contains(&0) {
                                continue;
                            }
                            if bound != Some(*kernel) {
                                d.cmd_bind_pipeline(
                                    cmd,
                                    vk::PipelineBindPoint::COMPUTE,
                                    self.pipelines[kernel],
                                );
                                bound = Some(*kernel);
                            }
                            d.cmd_push_constants(
                                cmd,
                                self.pipeline_layout,
                                vk::ShaderStageFlags::COMPUTE,
                                0,
                                &base.to_le_bytes(),
                            );
                            let g = |i: usize| groups[i].min(limits[i] as usize) as u32;
                            d.cmd_dispatch(cmd, g(0), g(1), g(2));
                            stats.dispatches += 1;
                        }
                        Command::Copy { src, dst, bytes } => {
                            if *bytes == 0 {
                                continue;
                            }
                            let (buffer, offset) = match *src {
                                Location::Arena(o) => (self.arena.buffer, o),
                                Location::Weights(o) => (self.weights.buffer, o),
                            };
                            let region = vk::BufferCopy::default()
                                .src_offset(offset as u64)
                                .dst_offset(*dst as u64)
                                .size(*bytes as u64);
                            d.cmd_copy_buffer(cmd, buffer, self.arena.buffer, &[region]);
                            stats.copies += 1;
                        }
                    }
                }
                stamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE, true);
            }
            barrier(d, cmd);
            copy_transfers(d, cmd, &self.outputs, buffers, false);
            let to_host = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::SHADER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ);
            d.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[to_host],
                &[],
                &[],
            );
            stamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE, false);
            d.end_command_buffer(cmd)
                .map_err(VulkanError::api("vkEndCommandBuffer"))?;
        }
        self.stats = stats;
        Ok(())
    }

    /// Submits the recorded command buffer and waits for the fence.
    fn submit_and_wait(&mut self) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        let submit =
            vk::SubmitInfo::default().command_buffers(std::slice::from_ref(&self.command_buffer));
        // SAFETY: the fence is unsignalled and the command buffer idle (no submission in flight).
        unsafe {
            d.reset_fences(&[self.fence])
                .map_err(VulkanError::api("vkResetFences"))?;
            d.queue_submit(self.ctx.queue, &[submit], self.fence)
                .map_err(VulkanError::api("vkQueueSubmit"))?;
        }
        self.in_flight = true;
        self.wait()
    }

    /// Waits for the submission in flight, if any.
    fn wait(&mut self) -> Result<(), VulkanError> {
        if !self.in_flight {
            return Ok(());
        }
        let nanos = u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: waiting on a live fence.
        match unsafe { self.ctx.device.wait_for_fences(&[self.fence], true, nanos) } {
            Ok(()) => {
                self.in_flight = false;
                Ok(())
            }
            Err(vk::Result::TIMEOUT) => Err(VulkanError::Timeout {
                millis: self.timeout.as_millis() as u64,
            }),
            Err(e) => Err(VulkanError::api("vkWaitForFences")(e)),
        }
    }

    /// One inference: inputs from `arena` in, the recorded plan, outputs back into `arena`.
    pub(crate) fn run(&mut self, arena: &mut [u8], timeout: Duration) -> Result<(), VulkanError> {
        self.timeout = timeout;
        if arena.len() < self.arena_bytes {
            return Err(VulkanError::HostArena {
                needed: self.arena_bytes,
                got: arena.len(),
            });
        }
        // A submission that timed out earlier must finish before the buffers are reused.
        self.wait()?;
        let staging = self.staging.bytes_mut();
        for t in &self.inputs {
            staging[t.staging..t.staging + t.bytes]
                .copy_from_slice(&arena[t.arena..t.arena + t.bytes]);
        }
        self.submit_and_wait()?;
        let status = u32::from_le_bytes(
            self.status.bytes()[..4]
                .try_into()
                .map_err(|_| VulkanError::CorruptPlan("status word"))?,
        );
        if status != 0 {
            return Err(VulkanError::IndexOutOfRange);
        }
        self.read_timing()?;
        let staging = self.staging.bytes();
        for t in &self.outputs {
            arena[t.arena..t.arena + t.bytes]
                .copy_from_slice(&staging[t.staging..t.staging + t.bytes]);
        }
        Ok(())
    }
}

/// Records the copies of `transfers` between the staging buffer and the arena: into the arena
/// (inputs) or out of it (outputs).
fn copy_transfers(
    d: &ash::Device,
    cmd: vk::CommandBuffer,
    transfers: &[Transfer],
    [staging, arena]: [vk::Buffer; 2],
    into_arena: bool,
) {
    let regions: Vec<_> = transfers
        .iter()
        .filter(|t| t.bytes > 0)
        .map(|t| {
            let (src, dst) = if into_arena {
                (t.staging, t.arena)
            } else {
                (t.arena, t.staging)
            };
            vk::BufferCopy::default()
                .src_offset(src as u64)
                .dst_offset(dst as u64)
                .size(t.bytes as u64)
        })
        .collect();
    if regions.is_empty() {
        return;
    }
    let (from, to) = if into_arena {
        (staging, arena)
    } else {
        (arena, staging)
    };
    // SAFETY: recording into a command buffer in the recording state; every region lies inside
    // both buffers (the staging buffer is sized from these transfers, the arena by the plan).
    unsafe { d.cmd_copy_buffer(cmd, from, to, &regions) };
}

/// Makes earlier shader and transfer writes visible to later shaders and transfers.
fn barrier(d: &ash::Device, cmd: vk::CommandBuffer) {
    use vk::AccessFlags as A;
    let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
    let memory = vk::MemoryBarrier::default()
        .src_access_mask(A::SHADER_WRITE | A::TRANSFER_WRITE)
        .dst_access_mask(A::SHADER_READ | A::SHADER_WRITE | A::TRANSFER_READ | A::TRANSFER_WRITE);
    // SAFETY: recording into a command buffer in the recording state.
    unsafe {
        d.cmd_pipeline_barrier(
            cmd,
            stages,
            stages,
            vk::DependencyFlags::empty(),
            &[memory],
            &[],
            &[],
        );
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let d = &self.ctx.device;
        // SAFETY: wait until the GPU no longer uses anything, then destroy what this program
        // created (null handles are allowed and skipped by Vulkan).
        unsafe {
            if self.in_flight {
                let _ = d.wait_for_fences(&[self.fence], true, u64::MAX);
            }
            for (_, pipeline) in std::mem::take(&mut self.pipelines) {
                d.destroy_pipeline(pipeline, None);
            }
            for module in self.modules.drain(..) {
                d.destroy_shader_module(module, None);
            }
            d.destroy_descriptor_pool(self.descriptor_pool, None);
            d.destroy_pipeline_layout(self.pipeline_layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_fence(self.fence, None);
            d.destroy_query_pool(self.queries, None);
            d.destroy_command_pool(self.command_pool, None);
        }
    }
}

//! Guest linear memories the host can place snapshot sections into without copying.
//!
//! Owns [`GuestMemoryCreator`] (the wasmtime `MemoryCreator` of every instance on Linux) and
//! [`place`] (`cluster.map-section`). A guest grows fresh pages for a section and asks the host to
//! fill them; the host replaces those pages with a private, copy-on-write mapping of the sealed
//! archive file (`cluster::archive`), so handing a 35–70 MiB section over costs a few page-table
//! entries instead of a copy into fresh memory, and pages the policy never reads are never
//! touched. A guest that writes to such a page gets its own copy of it; the archive cannot change
//! (it is sealed). Each memory is its own reservation, unmapped as a whole when the instance is
//! dropped, so no mapping outlives the evaluation or leaks into another instance's memory.

use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rebalancer_policy_sdk::model::MAP_ALIGN;
use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

use rebalancer_cluster::archive::FileSection;

/// Reservation when wasmtime leaves the choice to us (it asks for its configured reservation,
/// 4 GiB on 64-bit hosts, for 32-bit memories).
const DEFAULT_RESERVATION: usize = 4 << 30;

/// A memory's base address and accessible size, for the host calls of the evaluation that owns it.
#[derive(Debug, Clone)]
pub(super) struct MemoryHandle {
    base: NonNull<u8>,
    accessible: Arc<AtomicUsize>,
}

// SAFETY: the handle is only dereferenced by `place`, from host calls made by the guest running
// in the store that owns the memory (so on that store's thread, while the memory is alive).
unsafe impl Send for MemoryHandle {}

thread_local! {
    /// Memories created on this thread since the last [`take_created`]: instantiation is
    /// synchronous, so an evaluation finds its instance's memories here right after it.
    static CREATED: RefCell<Vec<MemoryHandle>> = const { RefCell::new(Vec::new()) };
}

/// Forget the memories recorded on this thread (before an instantiation).
pub(super) fn clear_created() {
    CREATED.with(|c| c.borrow_mut().clear());
}

/// The memories created on this thread since [`clear_created`].
pub(super) fn take_created() -> Vec<MemoryHandle> {
    CREATED.with(|c| std::mem::take(&mut *c.borrow_mut()))
}

/// Creates every guest memory as a reservation of its own (`PROT_NONE` until grown).
#[derive(Debug)]
pub(super) struct GuestMemoryCreator;

// SAFETY: memories are reserved as `reserved_size_in_bytes` (or more) plus
// `guard_size_in_bytes` of inaccessible address space, never move, start zeroed and only become
// accessible through `grow_to` — what wasmtime's bounds-check elision relies on.
unsafe impl MemoryCreator for GuestMemoryCreator {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        _maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        // Never less than wasmtime asked for: compiled code elides bounds checks that the
        // reservation and guard stand in for.
        let capacity = reserved_size_in_bytes
            .unwrap_or(DEFAULT_RESERVATION)
            .max(minimum)
            .next_multiple_of(MAP_ALIGN);
        let memory = GuestMemory::reserve(capacity, guard_size_in_bytes, minimum)
            .map_err(|e| format!("reserving a guest memory of {capacity} bytes: {e}"))?;
        CREATED.with(|c| {
            c.borrow_mut().push(MemoryHandle {
                base: memory.base,
                accessible: memory.accessible.clone(),
            })
        });
        Ok(Box::new(memory))
    }
}

struct GuestMemory {
    base: NonNull<u8>,
    /// Bytes reserved for the memory itself (it never grows past them).
    capacity: usize,
    /// `capacity` plus the guard.
    mapped: usize,
    accessible: Arc<AtomicUsize>,
}

// SAFETY: the memory is plain address space owned by this value; wasmtime synchronises access.
unsafe impl Send for GuestMemory {}
// SAFETY: as above; `&GuestMemory` only reads sizes and the base pointer.
unsafe impl Sync for GuestMemory {}

impl GuestMemory {
    fn reserve(capacity: usize, guard: usize, minimum: usize) -> std::io::Result<GuestMemory> {
        let mapped = capacity
            .checked_add(guard)
            .ok_or_else(|| std::io::Error::other("reservation overflows"))?;
        // SAFETY: a fresh anonymous reservation; no existing mapping is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| std::io::Error::other("mmap"))?;
        let mut memory = GuestMemory {
            base,
            capacity,
            mapped,
            accessible: Arc::new(AtomicUsize::new(0)),
        };
        memory.make_accessible(minimum)?;
        Ok(memory)
    }

    fn make_accessible(&mut self, new_size: usize) -> std::io::Result<()> {
        let old = self.accessible.load(Ordering::Acquire);
        if new_size > self.capacity {
            return Err(std::io::Error::other(format!(
                "{new_size} bytes exceed the reservation of {}",
                self.capacity
            )));
        }
        if new_size > old {
            let page = host_page_size();
            let from = old.next_multiple_of(page);
            let to = new_size.next_multiple_of(page);
            if to > from {
                // SAFETY: `[from, to)` lies inside our reservation (`to` ≤ capacity rounded to
                // MAP_ALIGN, itself a multiple of the page size) and was PROT_NONE.
                let rc = unsafe {
                    libc::mprotect(
                        self.base.as_ptr().add(from).cast(),
                        to - from,
                        libc::PROT_READ | libc::PROT_WRITE,
                    )
                };
                if rc != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        self.accessible.store(new_size.max(old), Ordering::Release);
        Ok(())
    }
}

// SAFETY: see `MemoryCreator` above; the base never moves and `byte_capacity` bytes plus the
// guard stay reserved for the memory's whole life.
unsafe impl LinearMemory for GuestMemory {
    fn byte_size(&self) -> usize {
        self.accessible.load(Ordering::Acquire)
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        self.make_accessible(new_size)
            .map_err(|e| wasmtime::format_err!("growing a guest memory: {e}"))
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // SAFETY: the whole reservation (and every section mapped into it) belongs to this
        // memory, which wasmtime drops only once no instance uses it.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.mapped) };
    }
}

fn host_page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Where the bytes of a section come from.
pub(super) enum Source<'a> {
    /// Mapped copy-on-write from the sealed archive file.
    File(FileSection<'a>),
    /// Copied (an archive on the heap).
    Bytes(&'a [u8]),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::File(f) => f.len,
            Source::Bytes(b) => b.len(),
        }
    }
}

/// Place a section at `offset` of the guest memory `memory`, for `cluster.map-section`. The
/// region — `offset` to the section's end rounded up to a wasm page — must be 64 KiB-aligned and
/// accessible (grown by the guest); the error says which rule the guest broke.
pub(super) fn place(memory: &MemoryHandle, offset: u32, source: Source<'_>) -> Result<(), String> {
    let offset = offset as usize;
    let len = source.len();
    if !offset.is_multiple_of(MAP_ALIGN) {
        return Err(format!(
            "map-section offset {offset} is not a multiple of {MAP_ALIGN} (the wasm page size)"
        ));
    }
    let span = len.next_multiple_of(MAP_ALIGN);
    let accessible = memory.accessible.load(Ordering::Acquire);
    if offset.checked_add(span).is_none_or(|end| end > accessible) {
        return Err(format!(
            "map-section needs {span} bytes of grown memory from offset {offset}, but the memory \
             is {accessible} bytes"
        ));
    }
    // SAFETY: `[offset, offset + span)` is inside the accessible part of the guest's memory
    // (checked above), which is read-write address space owned by that memory; the guest is
    // suspended in this host call, and nothing on the host holds a reference into the region.
    let dst = unsafe { memory.base.as_ptr().add(offset) };
    match source {
        Source::File(file) => {
            use std::os::fd::AsRawFd;
            // SAFETY: replaces `span` bytes of the guest's accessible memory (checked above) by a
            // private read-write mapping of the same size; the sealed file covers
            // `file.offset + span` (sections start on MAP_ALIGN boundaries and the file is
            // padded to one), so no access can fault past its end.
            let mapped = unsafe {
                libc::mmap(
                    dst.cast(),
                    span,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    file.fd.as_raw_fd(),
                    file.offset as libc::off_t,
                )
            };
            if mapped == libc::MAP_FAILED {
                return Err(format!(
                    "mapping a snapshot section failed: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Source::Bytes(bytes) => {
            // SAFETY: `bytes` is host memory, disjoint from the guest's region of `span ≥ len`
            // writable bytes at `dst`.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len) };
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(bytes: usize) -> (Box<dyn LinearMemory>, MemoryHandle) {
        clear_created();
        let ty = MemoryType::new(1, None);
        let m = GuestMemoryCreator
            .new_memory(ty, bytes, None, Some(1 << 30), 64 << 10)
            .unwrap();
        let mut handles = take_created();
        assert_eq!(handles.len(), 1);
        (m, handles.remove(0))
    }

    fn read(m: &dyn LinearMemory, at: usize, len: usize) -> Vec<u8> {
        // SAFETY: tests read inside the accessible part.
        unsafe { std::slice::from_raw_parts(m.as_ptr().add(at), len).to_vec() }
    }

    #[test]
    fn a_memory_grows_zeroed_and_refuses_to_pass_its_reservation() {
        let (mut m, handle) = memory(MAP_ALIGN);
        assert_eq!(m.byte_size(), MAP_ALIGN);
        m.grow_to(3 * MAP_ALIGN).unwrap();
        assert_eq!(handle.accessible.load(Ordering::Acquire), 3 * MAP_ALIGN);
        assert!(read(&*m, 0, 3 * MAP_ALIGN).iter().all(|&b| b == 0));
        assert!(m.grow_to(2 << 30).is_err());
        assert_eq!(m.byte_size(), 3 * MAP_ALIGN);
    }

    #[test]
    fn copies_land_where_asked_and_bad_regions_are_refused() {
        let (m, handle) = memory(3 * MAP_ALIGN);
        let section: Vec<u8> = (0..MAP_ALIGN + 10).map(|i| (i % 253) as u8).collect();
        place(&handle, MAP_ALIGN as u32, Source::Bytes(&section)).unwrap();
        assert_eq!(read(&*m, MAP_ALIGN, section.len()), section);
        assert!(read(&*m, 0, MAP_ALIGN).iter().all(|&b| b == 0));

        let unaligned = place(&handle, 4096, Source::Bytes(&section)).unwrap_err();
        assert!(unaligned.contains("not a multiple of 65536"), "{unaligned}");
        let too_far = place(&handle, 2 * MAP_ALIGN as u32, Source::Bytes(&section)).unwrap_err();
        assert!(too_far.contains("grown memory"), "{too_far}");
        let overflow = place(&handle, u32::MAX - 65535, Source::Bytes(&section)).unwrap_err();
        assert!(overflow.contains("grown memory"), "{overflow}");
    }

    #[test]
    fn a_mapped_section_reads_as_the_file_and_writes_stay_private() {
        use rebalancer_cluster::archive::SharedArchive;
        use rebalancer_policy_sdk::build::SnapshotBuilder;
        use rebalancer_policy_sdk::model::{self, Section};

        let mut b = SnapshotBuilder::new(1, 0);
        let ns = b.intern("default");
        for i in 0..2000 {
            b.snapshot_mut().pods.push(model::Pod {
                name: format!("pod-{i}"),
                namespace: ns,
                ..model::Pod::default()
            });
        }
        let bytes =
            model::to_bytes_aligned(&b.finish(), model::ArchiveBuffer::new(), MAP_ALIGN).unwrap();
        let archive = SharedArchive::new(bytes);
        let file = archive.file_section(Section::PodNames).expect("mappable");
        let expected = archive.bytes()[archive.range(Section::PodNames)].to_vec();

        let (m, handle) = memory(4 * MAP_ALIGN);
        let at = MAP_ALIGN;
        place(&handle, at as u32, Source::File(file)).unwrap();
        assert_eq!(read(&*m, at, expected.len()), expected);

        // The guest scribbles on its mapping: its copy changes, the archive does not.
        // SAFETY: inside the accessible part.
        unsafe { m.as_ptr().add(at).write_bytes(0xAB, 16) };
        assert_eq!(read(&*m, at, 16), vec![0xAB; 16]);
        assert_eq!(
            &archive.bytes()[archive.range(Section::PodNames)],
            &expected[..]
        );
        drop(m);
        assert_eq!(
            &archive.bytes()[archive.range(Section::PodNames)],
            &expected[..]
        );
    }
}

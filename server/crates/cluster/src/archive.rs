//! Where a snapshot's archive lives: in a sealed memory file that guests map, or on the heap.
//!
//! Owns [`SharedArchive`]. On Linux the archive (`model::to_bytes_aligned` output, every section
//! on a [`model::MAP_ALIGN`] boundary) is moved into a `memfd`, sealed against any change and
//! mapped read-only for the host's own reads; an evaluation then hands a guest a section as a
//! private, copy-on-write mapping of that file ([`SharedArchive::file_section`], used by
//! `engine::memory`) instead of copying ~35–70 MiB into its linear memory. Elsewhere, or if the
//! kernel refuses the memfd, the archive stays on the heap and guests receive copies.

use std::ops::Range;

use rebalancer_policy_sdk::model::{self, ArchiveBuffer, Section};

/// A snapshot's archive, immutable once built, shared by every evaluation on the snapshot.
pub struct SharedArchive {
    storage: Storage,
}

enum Storage {
    Heap(ArchiveBuffer),
    #[cfg(target_os = "linux")]
    File(sealed::SealedFile),
}

/// A section as a range of the sealed archive file, for mapping.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy)]
pub struct FileSection<'a> {
    pub fd: std::os::fd::BorrowedFd<'a>,
    /// Offset of the section in the file, a multiple of [`model::MAP_ALIGN`].
    pub offset: u64,
    /// Bytes of the section; the file extends at least to the next multiple of
    /// [`model::MAP_ALIGN`] past the section's end.
    pub len: usize,
}

impl SharedArchive {
    /// Take over an archive built with `model::to_bytes_aligned(.., model::MAP_ALIGN)`. On Linux
    /// it is moved into a sealed memory file (the buffer is freed); if that fails it stays on the
    /// heap, and the reason is logged.
    pub fn new(buffer: ArchiveBuffer) -> SharedArchive {
        #[cfg(target_os = "linux")]
        if buffer.len().is_multiple_of(model::MAP_ALIGN) {
            match sealed::SealedFile::new(&buffer) {
                Ok(file) => {
                    return SharedArchive {
                        storage: Storage::File(file),
                    };
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "could not move the snapshot archive into a sealed memory file; \
                     policies will receive copies of it"
                ),
            }
        }
        SharedArchive {
            storage: Storage::Heap(buffer),
        }
    }

    /// The whole archive.
    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Heap(buffer) => buffer.as_slice(),
            #[cfg(target_os = "linux")]
            Storage::File(file) => file.bytes(),
        }
    }

    /// The byte range of `section` in the archive.
    pub fn range(&self, section: Section) -> Range<usize> {
        model::header::range(self.bytes(), section.id())
            .expect("build_snapshot writes every section of the layout")
    }

    /// `section` as a range of the sealed file, when the archive lives in one.
    #[cfg(target_os = "linux")]
    pub fn file_section(&self, section: Section) -> Option<FileSection<'_>> {
        match &self.storage {
            Storage::Heap(_) => None,
            Storage::File(file) => {
                let range = self.range(section);
                range
                    .start
                    .is_multiple_of(model::MAP_ALIGN)
                    .then(|| FileSection {
                        fd: file.fd(),
                        offset: range.start as u64,
                        len: range.len(),
                    })
            }
        }
    }

    /// Whether guests receive mappings of this archive rather than copies.
    pub fn is_mappable(&self) -> bool {
        match &self.storage {
            Storage::Heap(_) => false,
            #[cfg(target_os = "linux")]
            Storage::File(_) => true,
        }
    }
}

impl AsRef<[u8]> for SharedArchive {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

#[cfg(target_os = "linux")]
mod sealed {
    use std::fs::File;
    use std::io::{self, Write};
    use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
    use std::ptr::NonNull;

    /// A memfd holding the archive, sealed so that nobody (this process included) can change,
    /// grow or shrink it, and mapped read-only (shared) for the host's reads.
    pub struct SealedFile {
        fd: OwnedFd,
        map: NonNull<u8>,
        len: usize,
    }

    // SAFETY: the mapping is read-only and the file sealed: the bytes never change, so sharing
    // `&[u8]` views of them across threads is sound.
    unsafe impl Send for SealedFile {}
    // SAFETY: as above.
    unsafe impl Sync for SealedFile {}

    impl SealedFile {
        pub fn new(contents: &[u8]) -> io::Result<SealedFile> {
            let name = c"rebalancer-snapshot";
            // SAFETY: plain syscall with a valid NUL-terminated name.
            let raw = unsafe {
                libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a freshly created descriptor nobody else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let mut file = File::from(fd);
            file.write_all(contents)?;
            let fd = OwnedFd::from(file);
            let seals = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK;
            // SAFETY: fcntl on a descriptor we own.
            if unsafe { libc::fcntl(raw_fd(&fd), libc::F_ADD_SEALS, seals | libc::F_SEAL_SEAL) } < 0
            {
                return Err(io::Error::last_os_error());
            }
            let len = contents.len();
            if len == 0 {
                return Err(io::Error::other("an archive is never empty"));
            }
            // SAFETY: a fresh read-only shared mapping of `len` bytes of a file that is exactly
            // `len` bytes long and can no longer shrink.
            let map = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    raw_fd(&fd),
                    0,
                )
            };
            if map == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let map = NonNull::new(map.cast::<u8>()).ok_or_else(|| io::Error::other("mmap"))?;
            Ok(SealedFile { fd, map, len })
        }

        pub fn bytes(&self) -> &[u8] {
            // SAFETY: `map` is a live read-only mapping of `len` bytes whose contents are sealed.
            unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.len) }
        }

        pub fn fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
    }

    fn raw_fd(fd: &OwnedFd) -> i32 {
        use std::os::fd::AsRawFd;
        fd.as_raw_fd()
    }

    impl Drop for SealedFile {
        fn drop(&mut self) {
            // SAFETY: the mapping was created in `new` and nothing borrows it past `self`.
            unsafe { libc::munmap(self.map.as_ptr().cast(), self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(len: usize) -> ArchiveBuffer {
        let mut b = ArchiveBuffer::with_capacity(len);
        b.extend_from_slice(&(0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        b
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_page_multiple_archive_moves_into_a_sealed_file_with_the_same_bytes() {
        let expected = buffer(2 * model::MAP_ALIGN);
        let archive = SharedArchive::new(buffer(2 * model::MAP_ALIGN));
        assert!(archive.is_mappable());
        assert_eq!(archive.bytes(), expected.as_slice());

        // Sealed: the file can be neither written nor resized, even by its owner.
        let Storage::File(file) = &archive.storage else {
            panic!("expected a sealed file")
        };
        let mut handle = std::fs::File::from(file.fd().try_clone_to_owned().unwrap());
        use std::io::Write;
        assert!(handle.write_all(b"x").is_err());
        assert!(handle.set_len(1).is_err());
        assert_eq!(archive.bytes(), expected.as_slice());
    }

    #[test]
    fn other_archives_stay_on_the_heap() {
        let archive = SharedArchive::new(buffer(1000));
        assert!(!archive.is_mappable());
        assert_eq!(archive.bytes(), buffer(1000).as_slice());
    }
}

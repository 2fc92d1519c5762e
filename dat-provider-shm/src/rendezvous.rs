//! The rendezvous directory: one listening `SOCK_SEQPACKET` unix socket per connection
//! qualifier, no daemon.
//!
//! * Directory: `params.dir`, else `$XDG_RUNTIME_DIR/datrs-shm`, else `/tmp/datrs-shm-<uid>`;
//!   created with mode 0700, refused unless it belongs to us, and made private if it is not
//!   (unless `allow_other_users`, where a shared directory is taken as the administrator set
//!   it up).
//! * Entry: `<dir>/<qual>` (decimal qualifier). A listener binds a private name
//!   `<dir>/.<qual>.<pid>.<n>`, listens, then claims the qualifier with `link(2)`, which fails
//!   if the name exists: there is never a window in which a half-made socket is visible.
//! * Leaks: a clean exit unlinks its entries (`unlisten`, IA close, drop). A crash leaves the
//!   file behind; it is harmless (connecting to it is refused by the kernel, which we report as
//!   `NON_PEER_REJECTED`) and removed by the next [`sweep`]: at every IA open, whenever a
//!   connect finds a dead entry, whenever a listen finds its name taken by a dead socket, and
//!   when a connection breaks because its peer died.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// The default directory of this user.
pub fn default_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => Path::new(&d).join("datrs-shm"),
        _ => PathBuf::from(format!("/tmp/datrs-shm-{}", sys::uid())),
    }
}

/// Creates `dir` (mode 0700) if needed. A `private` directory must be ours and is made
/// private (0700) if it is not; a shared one (`allow_other_users`: the administrator sets its
/// owner and permissions so that the users concerned can reach it) is taken as it is.
pub fn prepare(dir: &Path, private: bool) -> io::Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let md = std::fs::symlink_metadata(dir)?;
    if !md.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a directory",
        ));
    }
    if !private {
        return Ok(());
    }
    if md.uid() != sys::uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a directory owned by this user",
        ));
    }
    if md.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// The entry of `qual`.
pub fn entry(dir: &Path, qual: u64) -> PathBuf {
    dir.join(qual.to_string())
}

/// True if a live listener answers at `path` (a probe connection is opened and dropped).
fn alive(path: &Path) -> bool {
    let Ok(s) = sys::seqpacket() else {
        return true; // cannot tell: keep it
    };
    match sys::connect(s.as_fd(), path) {
        Ok(()) => true,
        Err(e) => !matches!(
            e.raw_os_error(),
            Some(libc::ECONNREFUSED) | Some(libc::ENOENT) | Some(libc::ENOTSOCK)
        ),
    }
}

/// Removes dead entries: qualifier sockets nobody listens on, and private names of processes
/// that no longer exist. Returns how many were removed.
pub fn sweep(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = e.path();
        let dead = if let Some(rest) = name.strip_prefix('.') {
            // .<qual>.<pid>.<n>
            let pid = rest.split('.').nth(1).and_then(|p| p.parse::<i32>().ok());
            pid.is_some_and(|p| !sys::pid_alive(p))
        } else if name.parse::<u64>().is_ok() {
            !alive(&path)
        } else {
            false
        };
        if dead && std::fs::remove_file(&path).is_ok() {
            tracing::debug!(?path, "removed stale rendezvous entry");
            removed += 1;
        }
    }
    removed
}

/// A claimed qualifier: the listening socket and its entry, unlinked on drop.
#[derive(Debug)]
pub struct Listener {
    /// The listening socket.
    pub sock: OwnedFd,
    path: PathBuf,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why a qualifier could not be claimed.
#[derive(Debug)]
pub enum ListenError {
    /// A live listener holds it.
    InUse,
    /// A system error.
    Io(io::Error),
}

/// Claims `qual`: binds a private name, listens, links it to the qualifier's entry.
pub fn listen(dir: &Path, qual: u64) -> Result<Listener, ListenError> {
    let tmp = dir.join(format!(
        ".{qual}.{}.{}",
        sys::pid(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let sock = sys::seqpacket().map_err(ListenError::Io)?;
    let _ = std::fs::remove_file(&tmp);
    sys::bind_listen(sock.as_fd(), &tmp).map_err(ListenError::Io)?;
    let target = entry(dir, qual);
    let mut result = std::fs::hard_link(&tmp, &target);
    if matches!(&result, Err(e) if e.kind() == io::ErrorKind::AlreadyExists) && !alive(&target) {
        // A crashed listener's leftover: replace it.
        let _ = std::fs::remove_file(&target);
        result = std::fs::hard_link(&tmp, &target);
    }
    let _ = std::fs::remove_file(&tmp);
    match result {
        Ok(()) => Ok(Listener { sock, path: target }),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(ListenError::InUse),
        Err(e) => Err(ListenError::Io(e)),
    }
}

/// Connects to the listener of `qual`. `Ok(None)`: nobody listens (a dead entry is removed)
/// or its backlog is full.
pub fn connect(dir: &Path, qual: u64) -> io::Result<Option<OwnedFd>> {
    let path = entry(dir, qual);
    let sock = sys::seqpacket()?;
    match sys::connect(sock.as_fd(), &path) {
        Ok(()) => Ok(Some(sock)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
            let _ = std::fs::remove_file(&path);
            Ok(None)
        }
        // The listener's backlog is full: the request is refused, as TCP would.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("datrs-shm-test-{tag}-{}", sys::pid()));
        let _ = std::fs::remove_dir_all(&d);
        prepare(&d, true).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn claim_in_use_release_and_stale_cleanup() {
        let d = scratch("rdv");
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let l = listen(&d, 42).unwrap();
        assert!(matches!(listen(&d, 42), Err(ListenError::InUse)));
        assert_eq!(names(&d), vec!["42".to_owned()]);
        assert!(connect(&d, 42).unwrap().is_some());
        assert!(connect(&d, 43).unwrap().is_none());
        drop(l);
        assert!(names(&d).is_empty(), "a released qualifier leaves no file");

        // A crashed listener: its socket file stays, nobody listens on it.
        let path = entry(&d, 7);
        let dead = sys::seqpacket().unwrap();
        sys::bind_listen(dead.as_fd(), &path).unwrap();
        drop(dead);
        std::fs::write(d.join(".9.999999999.0"), b"").unwrap();
        assert_eq!(sweep(&d), 2);
        assert!(names(&d).is_empty());
        // A dead entry is also replaced by the next listener.
        let dead = sys::seqpacket().unwrap();
        sys::bind_listen(dead.as_fd(), &path).unwrap();
        drop(dead);
        let l = listen(&d, 7).unwrap();
        drop(l);
        assert!(names(&d).is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }
}

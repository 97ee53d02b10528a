//! The embedded store's ownership: an OS file lock on `<database>.lock`,
//! held for the life of the store, so that a second idemd process cannot
//! open the same database file as well. The lock is released when the
//! process ends, even by SIGKILL.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::domain::{Error, Result};

/// The OS lock that makes one process the owner of a database file. Held
/// while the store is open; released by [`Store::close`] or when dropped.
#[derive(Debug)]
pub struct DatabaseLock {
    path: PathBuf,
    file: File,
}

impl DatabaseLock {
    /// The lock file of a database: `<database>.lock`, beside it.
    pub fn path_for(database: &Path) -> PathBuf {
        let mut name = database.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock of `database`, creating its directory if needed.
    /// `Ok(None)`: another process holds it.
    pub fn try_acquire(database: &Path) -> Result<Option<Self>> {
        if let Some(directory) = database
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            create_data_directory(directory).map_err(|error| {
                Error::Internal(format!(
                    "cannot create the data directory {}: {error}",
                    directory.display()
                ))
            })?;
        }
        let path = Self::path_for(database);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|error| Error::Internal(format!("cannot open {}: {error}", path.display())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(error)) => {
                return Err(Error::Internal(format!(
                    "cannot lock {}: {error}",
                    path.display()
                )));
            }
        }
        // For the message another process shows when it finds the lock held.
        let pid = std::process::id().to_string();
        let noted = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(pid.as_bytes()));
        if let Err(error) = noted {
            warn!(%error, lock = %path.display(), "cannot write the pid into the lock file");
        }
        Ok(Some(Self { path, file }))
    }

    /// The process id the current holder wrote into the lock file, if any.
    pub fn holder(database: &Path) -> Option<u32> {
        let mut contents = String::new();
        File::open(Self::path_for(database))
            .ok()?
            .read_to_string(&mut contents)
            .ok()?;
        contents.trim().parse().ok()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Creates a data directory (and its parents) that only its owner can enter:
/// it holds results and, with `--dev`, a token. An existing one is left as is.
pub fn create_data_directory(directory: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(directory)
}

impl Drop for DatabaseLock {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlocking first says so.
        let _ = self.file.unlock();
    }
}

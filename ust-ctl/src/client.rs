//! The client end of the `ctl` socket, for the `ust` command and tests.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use ust_core::protocol::{read_frame, write_frame, ProtocolError};

use crate::protocol::{Command, Payload, Reply, Request, CTL_VERSION};

/// A connection to the daemon's `ctl` socket, for the CLI and tests.
#[derive(Debug)]
pub struct Client {
    sock: UnixStream,
}

/// Errors of [`Client`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon answers on the socket.
    #[error("no ust-consumerd is running ({path}: {source})")]
    NotRunning {
        /// The socket path.
        path: PathBuf,
        /// The connect error.
        source: std::io::Error,
    },
    /// The socket exists but this user may not connect to it (another user's daemon, or
    /// root's daemon for a user outside group `tracing`).
    #[error("permission denied connecting to {path}: the daemon there belongs to another user (root's daemon takes control commands from root and members of group tracing only)")]
    Denied {
        /// The socket path.
        path: PathBuf,
    },
    /// The daemon refused the request.
    #[error("{0}")]
    Daemon(String),
    /// The conversation failed.
    #[error("talking to ust-consumerd: {0}")]
    Protocol(#[from] ProtocolError),
}

impl Client {
    /// Connects to the daemon of socket directory `dir`.
    ///
    /// # Errors
    /// [`ClientError::NotRunning`] when nothing listens.
    pub fn connect(dir: &Path) -> Result<Client, ClientError> {
        let path = dir.join(ust_core::rundir::CTL_SOCKET);
        match UnixStream::connect(&path) {
            Ok(sock) => Ok(Client { sock }),
            Err(source) if source.kind() == std::io::ErrorKind::PermissionDenied => Err(ClientError::Denied { path }),
            Err(source) => Err(ClientError::NotRunning { path, source }),
        }
    }

    /// Sends `command` and waits for the reply.
    ///
    /// # Errors
    /// [`ClientError::Daemon`] with the daemon's message, or [`ClientError::Protocol`].
    pub fn call(&mut self, command: Command) -> Result<Payload, ClientError> {
        // A daemon that refuses this peer answers and closes at once, possibly before the
        // request is written: the write then fails (EPIPE), but its answer is waiting to
        // be read, and says more than "broken pipe".
        let written = write_frame(&self.sock, &Request { version: CTL_VERSION, command });
        match (read_frame::<Reply>(&self.sock), written) {
            (Ok(Reply::Error { message }), _) => Err(ClientError::Daemon(message)),
            (Ok(Reply::Ok(p)), Ok(())) => Ok(*p),
            (_, Err(e)) | (Err(e), Ok(())) => Err(e.into()),
        }
    }
}

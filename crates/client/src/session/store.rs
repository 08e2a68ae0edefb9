//! Uploads in extended block mode: one file (ALLO, REST, STOR), and many
//! files pipelined over the cached channels.

use super::{channel_changed, BatchFile, Channel, Marker, ServerSession};
use crate::control::refused;
use crate::error::ClientError;
use ferry_io::mode_e::{self, BlockSource, SendPlan, TransferControl};
use ferry_io::stream::CopyError;
use ferry_proto::client::Expect;
use ferry_proto::command::{Allo, Command};
use ferry_proto::RangeSet;
use std::net::SocketAddr;
use std::sync::Arc;

//! `--verify`: checksums of source and destination after a file, with an
//! algorithm both ends have (CKSM on servers, computed here for local
//! files). The choice of algorithm and the comparison are
//! `ferry_proto::client::checksum`.

use super::{local_err, Client};
use crate::error::ClientError;
use crate::location::Location;
use ferry_proto::client::checksum;
use std::fs::File;

impl Client {
    /// Compares checksums of source and destination; returns the algorithm.
    pub(super) async fn verify(&mut self, src: &Location, dst: &Location) -> Result<String, ClientError> {
        let requested = self.opts.verify.clone().unwrap_or_else(|| "auto".into());
        let mut supported: Option<Vec<String>> = None;
        for loc in [src, dst] {
            if let Location::Remote(u) = loc {
                let algs = self.session(u).await?.checksums();
                supported = Some(match supported {
                    None => algs,
                    Some(prev) => checksum::common(prev, &algs),
                });
            }
        }
        // Local files can be summed with anything Ferry knows.
        let supported = supported
            .unwrap_or_else(|| ferry_proto::session::CHECKSUM_ALGORITHMS.iter().map(|s| s.to_string()).collect());
        let alg = checksum::choose(&requested, &supported).map_err(|e| ClientError::Usage(e.to_string()))?;
        let a = self.checksum_of(src, &alg).await?;
        let b = self.checksum_of(dst, &alg).await?;
        if !checksum::same_digest(&a, &b) {
            return Err(ClientError::ChecksumMismatch {
                path: dst.to_string(),
                algorithm: alg,
                source_value: a,
                destination_value: b,
            });
        }
        Ok(alg)
    }

    pub(super) async fn checksum_of(&mut self, loc: &Location, alg: &str) -> Result<String, ClientError> {
        match loc {
            Location::Local(p) => {
                let (p, alg) = (p.clone(), alg.to_string());
                tokio::task::spawn_blocking(move || {
                    let f = File::open(&p).map_err(local_err(&p))?;
                    ferry_io::checksum::file_checksum(&f, &alg, 0, None).map_err(local_err(&p))
                })
                .await
                .map_err(|e| ClientError::Data(e.to_string()))?
            }
            Location::Remote(u) => {
                let path = u.path.clone();
                self.session(u).await?.checksum(alg, &path).await
            }
        }
    }
}

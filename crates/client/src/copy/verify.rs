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
        let alg = self.checksum_algorithm(src, dst).await?;
        let a = self.checksum_of(src, &alg).await?;
        let b = self.checksum_of(dst, &alg).await?;
        compare(dst, &alg, &a, &b)?;
        Ok(alg)
    }

    /// [`verify`](Self::verify) for the files of a batch, all on the same
    /// two servers: each server's CKSM commands go out a window at a time
    /// in one write, so a batch pays a round trip per window, not two per
    /// file. For each pair: the algorithm, or why it did not verify.
    pub(super) async fn verify_many(&mut self, pairs: &[(Location, Location)]) -> Vec<Result<String, ClientError>> {
        let Some((src, dst)) = pairs.first() else { return Vec::new() };
        let alg = match self.checksum_algorithm(src, dst).await {
            Ok(a) => a,
            Err(e) => return pairs.iter().map(|_| Err(ClientError::Usage(e.to_string()))).collect(),
        };
        let srcs: Vec<&Location> = pairs.iter().map(|p| &p.0).collect();
        let dsts: Vec<&Location> = pairs.iter().map(|p| &p.1).collect();
        let a = self.checksums_of(&srcs, &alg).await;
        let b = self.checksums_of(&dsts, &alg).await;
        a.into_iter()
            .zip(b)
            .zip(pairs)
            .map(|((a, b), (_, d))| match (a, b) {
                (Ok(a), Ok(b)) => compare(d, &alg, &a, &b).map(|()| alg.clone()),
                (Err(e), _) | (_, Err(e)) => Err(e),
            })
            .collect()
    }

    /// Checksums of many files on one side (local, or one server).
    async fn checksums_of(&mut self, locs: &[&Location], alg: &str) -> Vec<Result<String, ClientError>> {
        let remote: Vec<String> = locs
            .iter()
            .filter_map(|l| match l {
                Location::Remote(u) => Some(u.path.clone()),
                Location::Local(_) => None,
            })
            .collect();
        if remote.len() == locs.len() {
            if let Some(Location::Remote(u)) = locs.first() {
                let window = self.opts.pipeline.max(1);
                return match self.session(u).await {
                    Ok(s) => match s.checksum_many(alg, &remote, window).await {
                        Ok(v) => v,
                        Err(e) => {
                            let msg = e.to_string();
                            remote.iter().map(|_| Err(ClientError::Usage(msg.clone()))).collect()
                        }
                    },
                    Err(e) => {
                        let msg = e.to_string();
                        remote.iter().map(|_| Err(ClientError::Usage(msg.clone()))).collect()
                    }
                };
            }
        }
        let mut out = Vec::with_capacity(locs.len());
        for l in locs {
            out.push(self.checksum_of(l, alg).await);
        }
        out
    }

    /// An algorithm both ends of `src` → `dst` have (`--verify`'s choice).
    async fn checksum_algorithm(&mut self, src: &Location, dst: &Location) -> Result<String, ClientError> {
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
        checksum::choose(&requested, &supported).map_err(|e| ClientError::Usage(e.to_string()))
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

fn compare(dst: &Location, alg: &str, a: &str, b: &str) -> Result<(), ClientError> {
    if checksum::same_digest(a, b) {
        return Ok(());
    }
    Err(ClientError::ChecksumMismatch {
        path: dst.to_string(),
        algorithm: alg.to_string(),
        source_value: a.to_string(),
        destination_value: b.to_string(),
    })
}

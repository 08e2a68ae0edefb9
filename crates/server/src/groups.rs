//! Which groups `SITE CHGRP` may give a file.
//!
//! Ferry's users are virtual: whoever logs in, every file is created and
//! owned by the server process's own user, so "the groups the user may
//! use" cannot be the login's groups on the host — there are none. The
//! rule is instead the server process's own groups (its effective group
//! and its supplementary groups): exactly what chown(2) lets an
//! unprivileged process give a file it owns, and, for a server started
//! as root, the same short list rather than every group on the host. An
//! administrator who wants users to hand files to a group adds the server's
//! account to it. Only users with write access may ask (the session
//! checks), confined like `SITE CHMOD` (`docs/security.md`, "SITE CHGRP").
//!
//! The Globus server's file DSI takes a group name, or a number when no
//! group has that name, and calls chown(2) as the mapped local user; this
//! module resolves names the same way.

use ferry_proto::session::FsError;
use nix::unistd::{getegid, getgroups, Gid, Group};

/// The gid `SITE CHGRP <spec>` may set, or why not.
pub fn allowed_gid(spec: &str) -> Result<u32, FsError> {
    let gid = resolve(spec)?;
    let own = own_groups();
    if own.contains(&gid) {
        return Ok(gid.as_raw());
    }
    let names: Vec<String> = own.iter().map(|g| name_of(*g)).collect();
    Err(FsError::Refused(format!(
        "group {spec} is not one this server may give (SITE CHGRP can set only the server's own groups: {})",
        names.join(", ")
    )))
}

/// A group name, or a number when no group has that name (as Globus).
fn resolve(spec: &str) -> Result<Gid, FsError> {
    if let Ok(Some(g)) = Group::from_name(spec) {
        return Ok(g.gid);
    }
    match spec.parse::<u32>() {
        Ok(n) => Ok(Gid::from_raw(n)),
        Err(_) => Err(FsError::Refused(format!("no group named {spec}"))),
    }
}

/// The effective group and the supplementary groups of this process.
fn own_groups() -> Vec<Gid> {
    let mut groups = vec![getegid()];
    for g in getgroups().unwrap_or_default() {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
}

fn name_of(gid: Gid) -> String {
    match Group::from_gid(gid) {
        Ok(Some(g)) => g.name,
        _ => gid.as_raw().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_groups_by_name_or_number_and_nothing_else() {
        let egid = getegid();
        assert_eq!(allowed_gid(&egid.as_raw().to_string()), Ok(egid.as_raw()));
        assert_eq!(allowed_gid(&name_of(egid)), Ok(egid.as_raw()));
        // A group this process is not in: refused, naming the allowed ones.
        let foreign = (1..60000u32).map(Gid::from_raw).find(|g| !own_groups().contains(g)).unwrap();
        match allowed_gid(&foreign.as_raw().to_string()) {
            Err(FsError::Refused(why)) => assert!(why.contains(&name_of(egid)), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(allowed_gid("no-such-group-ferry"), Err(FsError::Refused(w)) if w.contains("no group named")));
    }
}

//! The user and group exec plugins run as (`--exec-run-as UID[:GID]`).

use std::{fmt, str::FromStr};

/// The user and group an exec plugin runs as, when it must not run as the collector: a
/// plugin run as another UID cannot read files only the collector's UID may read, such as
/// its ServiceAccount token mounted with mode 0400.
///
/// Starting a plugin as another user needs `CAP_SETUID` and `CAP_SETGID`, and giving it its
/// private `HOME` needs `CAP_CHOWN`. The plugin keeps no supplementary group.
///
/// ```
/// use member_client::exec::RunAs;
/// let run_as: RunAs = "65534".parse().unwrap();
/// assert_eq!((run_as.uid, run_as.gid), (65534, 65534));
/// let run_as: RunAs = "1000:2000".parse().unwrap();
/// assert_eq!((run_as.uid, run_as.gid), (1000, 2000));
/// for bad in ["0", "10:0", "nobody", "-1", "", ":5"] {
///     assert!(bad.parse::<RunAs>().is_err(), "{bad}");
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunAs {
    /// The plugin's user ID.
    pub uid: u32,
    /// The plugin's group ID.
    pub gid: u32,
}

impl FromStr for RunAs {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let number = |part: &str, what: &str| {
            part.parse::<u32>()
                .map_err(|_| format!("{what} {part:?} is not a number (UID[:GID])"))
        };
        let (uid, gid) = match raw.split_once(':') {
            Some((uid, gid)) => (number(uid, "UID")?, number(gid, "GID")?),
            None => {
                let uid = number(raw, "UID")?;
                (uid, uid)
            }
        };
        // Root, as a plugin's user or group, would undo the point.
        if uid == 0 || gid == 0 {
            return Err("exec plugins may not run as UID or GID 0".to_owned());
        }
        Ok(Self { uid, gid })
    }
}

impl fmt::Display for RunAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

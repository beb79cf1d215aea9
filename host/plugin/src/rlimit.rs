//! The one place refract-plugin calls into libc: the resource limits of a compiler child
//! ([`crate::compile`]), set in the child between fork and exec.

use std::process::Command;
use std::time::Duration;

/// Makes the process `command` starts run with at most `address_space` bytes of virtual memory
/// and about `cpu` of CPU time (whole seconds, plus one: the wall-clock deadline comes first;
/// past it the kernel sends SIGXCPU, a second later SIGKILL), and without a core dump. A limit
/// above what this process may grant itself is lowered to that.
#[cfg(unix)]
pub(crate) fn limit_child(command: &mut Command, address_space: u64, cpu: Duration) {
    use std::os::unix::process::CommandExt;
    let cpu = cpu.as_secs().saturating_add(1);
    let limits = [
        (libc::RLIMIT_AS, address_space, address_space),
        (libc::RLIMIT_CPU, cpu, cpu.saturating_add(1)),
        (libc::RLIMIT_CORE, 0, 0),
    ];
    let set = move || -> std::io::Result<()> {
        for (resource, soft, hard) in limits {
            let mut current = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
            if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let hard = (hard as libc::rlim_t).min(current.rlim_max);
            let wanted = libc::rlimit {
                rlim_cur: (soft as libc::rlim_t).min(hard),
                rlim_max: hard,
            };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(resource, &wanted) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: `set` runs in the child between fork and exec, where only async-signal-safe
    // functions may be called: it calls getrlimit and setrlimit (both are), allocates nothing
    // (its values were computed before the fork; an OS error is stored without allocating).
    unsafe {
        command.pre_exec(set);
    }
}

/// Without Unix resource limits the child runs unlimited; the wall-clock deadline still holds.
#[cfg(not(unix))]
pub(crate) fn limit_child(_command: &mut Command, _address_space: u64, _cpu: Duration) {}

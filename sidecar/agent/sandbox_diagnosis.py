"""Why bwrap could not create its namespaces, and the documented fix for each cause.

bwrap run by a normal user creates a user namespace first (as root it does not), and
three kernel settings can forbid that; its own error text says only that creating a
namespace failed, or that writing the uid map was refused. Which one it was decides the
fix, so the host's values are read (`read_facts`) and judged by `diagnose`, a pure
function of (bwrap's stderr, those values): the unit tests feed it both this machine's
real values and constructed ones.

What bwrap 0.8.0 prints, by cause (found by experiment and in its source):

- `user.max_user_namespaces` is 0, or its limit is reached here or in an enclosing
  namespace (a container's): clone fails with ENOSPC, "Creating new namespace failed:
  No space left on device".
- `kernel.unprivileged_userns_clone=0` (Debian's and older Ubuntu's patch): EPERM, "No
  permissions to creating new namespace, likely because the kernel does not allow
  non-privileged user namespaces".
- `kernel.apparmor_restrict_unprivileged_userns=1` (Ubuntu 24.04+): the namespace is
  created but AppArmor takes every capability in it from programs without a profile
  that allows `userns`, so "setting up uid map: Permission denied" (or "loopback: Failed
  RTM_NEWADDR: Operation not permitted").
- None of these, or as root: a container runtime (seccomp, no CAP_SYS_ADMIN) refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Where the values live; a missing file means the kernel has no such setting.
APPARMOR_RESTRICT = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
UNPRIVILEGED_CLONE = "/proc/sys/kernel/unprivileged_userns_clone"
MAX_USER_NAMESPACES = "/proc/sys/user/max_user_namespaces"

# The gist of the profile Ubuntu documents for programs that need user namespaces.
APPARMOR_PROFILE = (
    "abi <abi/4.0>, include <tunables/global>, "
    "profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }"
)

# bwrap's words when the namespace itself could not be made (lowercased).
_NAMESPACE_WORDS = ("namespace", "uid map", "gid map", "setting up uid", "setting up gid")
_APPARMOR_WORDS = ("uid map", "gid map", "rtm_newaddr", "operation not permitted")


@dataclass(frozen=True, slots=True)
class HostFacts:
    """The settings that decide whether bwrap may create a user namespace; None where the
    kernel has no such setting (or it could not be read)."""

    root: bool  # bwrap run by root creates no user namespace: the settings do not apply
    apparmor_restrict_unprivileged_userns: int | None
    unprivileged_userns_clone: int | None
    max_user_namespaces: int | None


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as handle:
            return int(handle.read(64).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_facts() -> HostFacts:
    """This process's view: the user namespace settings are per namespace (a container
    sees its own), which is the view bwrap started from here gets."""
    return HostFacts(
        root=os.geteuid() == 0,
        apparmor_restrict_unprivileged_userns=_read_int(APPARMOR_RESTRICT),
        unprivileged_userns_clone=_read_int(UNPRIVILEGED_CLONE),
        max_user_namespaces=_read_int(MAX_USER_NAMESPACES),
    )


def is_namespace_failure(stderr: str) -> bool:
    lowered = stderr.lower()
    return any(word in lowered for word in _NAMESPACE_WORDS)


def _container() -> str:
    return (
        "the system refused to create namespaces, typically a container runtime (seccomp "
        "or no CAP_SYS_ADMIN): allow nested namespaces (e.g. docker run --security-opt "
        "seccomp=unconfined, or --privileged), or run the sidecar outside the container"
    )


def diagnose(stderr: str, facts: HostFacts) -> str | None:
    """What stopped bwrap from creating its namespaces and how to fix it, or None when its
    error (`stderr`) is not about namespaces. Every setting that forbids it is named; the
    fixes are the ones docs/consent-and-sandbox.md documents."""
    lowered = stderr.lower()
    apparmor = (
        not facts.root
        and facts.apparmor_restrict_unprivileged_userns == 1
        and any(word in lowered for word in _APPARMOR_WORDS)
    )
    if not (apparmor or is_namespace_failure(stderr)):
        return None
    if facts.root:  # no user namespace is made: the settings below do not apply
        return _container()
    causes: list[str] = []
    if facts.max_user_namespaces == 0:
        causes.append(
            "user namespaces are switched off (user.max_user_namespaces = 0): run "
            "`sysctl -w user.max_user_namespaces=15000` as root and keep it in "
            "/etc/sysctl.d/ (in a container, the host or the runtime sets it)"
        )
    if facts.unprivileged_userns_clone == 0:
        causes.append(
            "the kernel forbids unprivileged user namespaces "
            "(kernel.unprivileged_userns_clone = 0, Debian): run "
            "`sysctl -w kernel.unprivileged_userns_clone=1` as root and keep it in "
            "/etc/sysctl.d/"
        )
    if apparmor:
        causes.append(
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 24.04+): give bwrap "
            f"a profile that allows them, /etc/apparmor.d/bwrap with `{APPARMOR_PROFILE}`, "
            "then `apparmor_parser -r /etc/apparmor.d/bwrap` (see docs/consent-and-sandbox.md); "
            "or, for the whole system, `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
        )
    if not causes and ("no space left" in lowered or "enospc" in lowered):
        limit = facts.max_user_namespaces
        here = f" (here {limit})" if limit is not None else ""
        causes.append(
            f"the limit on user namespaces is reached: user.max_user_namespaces{here}, or a "
            "lower one in an enclosing namespace (a container's); raise it with `sysctl -w "
            "user.max_user_namespaces=15000` where it is set"
        )
    return "; ".join(causes) if causes else _container()

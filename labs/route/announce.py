"""One line every lab command prints first: the profile it will use and why (issue 25: chosen once, shown always)."""

from __future__ import annotations

# Subcommands that read a profile the way get_profile() picks it. The rehearsal has its own default
# (the saved choice, else rtx5090-base with a GPU and ci without one: labs.rehearsal.budget) and prints its profile itself.
PROFILE_COMMANDS = ("l71", "l72", "sweep", "vram")


def given_profile(argv: list[str]) -> str | None:
    """The value of ``--profile`` in ``argv`` (``--profile X`` or ``--profile=X``), None when absent."""
    for i, arg in enumerate(argv):
        if arg == "--profile" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--profile="):
            return arg.split("=", 1)[1]
    return None


def profile_line_es(argv: list[str], command: str = "") -> str:
    from labs.core.profiles import default_profile_name

    given = given_profile(argv)
    if given:
        return f"[perfil] {given} (--profile {given})"
    if command == "l72":
        from labs.route import l72_profile

        profile, why = l72_profile()
        return f"[perfil] {profile.name} ({why})"
    name, why = default_profile_name()
    return f"[perfil] {name} ({why})"

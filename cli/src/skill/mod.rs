//! `graphmind skill [--install [--force]]`: the SKILL.md that teaches a coding agent to
//! instrument the user's project and drive GraphMind (`serve --json`, `pauses`, `wait`,
//! `resume`, `mcp`). Printed on stdout; `--install` writes it to
//! `.claude/skills/graphmind/SKILL.md` under the current folder (Claude Code's project
//! skills; other agents read the same file), refusing to replace one without `--force`.

use std::path::{Path, PathBuf};

/// The skill, embedded in the binary.
pub const SKILL_MD: &str = include_str!("SKILL.md");
/// Where `--install` puts it, relative to the current folder.
pub const INSTALL_PATH: &str = ".claude/skills/graphmind/SKILL.md";

/// Writes the skill under `base`; `Err` names the path that failed and why.
pub fn install(base: &Path, force: bool) -> Result<PathBuf, String> {
    let target = base.join(INSTALL_PATH);
    if target.exists() && !force {
        return Err(format!(
            "{} already exists; re-run with --force to replace it",
            target.display()
        ));
    }
    let dir = target.parent().unwrap_or(base);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(&target, SKILL_MD)
        .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    Ok(target)
}

/// `graphmind skill`. Returns the exit code.
pub fn main(do_install: bool, force: bool) -> i32 {
    if !do_install {
        print!("{SKILL_MD}");
        return 0;
    }
    match install(Path::new("."), force) {
        Ok(p) => {
            let shown = std::fs::canonicalize(&p).unwrap_or(p);
            println!("Wrote {}", shown.display());
            println!(
                "Claude Code loads it in this project; point other coding agents at the same file."
            );
            0
        }
        Err(e) => {
            eprintln!("graphmind skill: {e}");
            1
        }
    }
}

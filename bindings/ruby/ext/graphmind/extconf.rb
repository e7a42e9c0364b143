# frozen_string_literal: true

# The source gem's build: writes a Makefile that `gem install` runs. `make` compiles the
# extension (graphmind-ruby) and the server (graphmind-cli) with cargo, release, from the
# Rust sources the gem carries; `make install` puts graphmind_native.so in the gem's
# extension directory and the server where the gem's `graphmind` executable looks
# (bindings/ruby/libexec). Needs cargo on PATH (or $CARGO); no rubygems.org, no rb_sys gem.
require "rbconfig"

root = File.expand_path("../../../..", __dir__)
cargo = ENV.fetch("CARGO", "cargo")
target = ENV.fetch("CARGO_TARGET_DIR", File.join(root, "target"))
# The cargo build's own target folder is removed after install (it is large); a shared
# CARGO_TARGET_DIR is left alone.
cleanup = ENV.key?("CARGO_TARGET_DIR") ? "@:" : "rm -rf #{target}"
dlext = RbConfig::CONFIG["host_os"].match?(/darwin/) ? "dylib" : "so"
unless system(cargo, "--version", out: File::NULL, err: File::NULL)
  abort "graphmind: the source gem needs Rust (cargo, not found on PATH). Install the " \
        "x86_64-linux platform gem instead, or Rust from https://rustup.rs (docs/install.md)."
end

File.write("Makefile", <<~MAKE)
  # Written by extconf.rb (graphmind source gem).
  sitearchdir ?= #{RbConfig::CONFIG['sitearchdir']}
  all:
  \tcd #{root} && #{cargo} build --release -p graphmind-ruby -p graphmind-cli
  \tcp #{target}/release/libgraphmind_native.#{dlext} graphmind_native.so
  install: all
  \tmkdir -p $(DESTDIR)$(sitearchdir) #{root}/bindings/ruby/libexec
  \tcp graphmind_native.so $(DESTDIR)$(sitearchdir)/graphmind_native.so
  \tcp #{target}/release/graphmind #{root}/bindings/ruby/libexec/graphmind
  \t#{cleanup}
  clean:
  \t@:
MAKE

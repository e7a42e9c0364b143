# frozen_string_literal: true

# The GraphMind gem: the Ruby skin (bindings/ruby/lib) plus the Rust core compiled into
# bindings/ruby/lib/graphmind_native.so. rubygems.org is not needed at any step:
#
#   rake compile                      # cargo build -p graphmind-ruby --release, copies the .so
#   gem build graphmind.gemspec       # -> graphmind-<version>-<platform>.gem (ships the .so)
#   gem install --local graphmind-*.gem
#
# `make dist` also copies the `graphmind` server into bindings/ruby/libexec/ first: the gem
# then ships it, and its executable `graphmind` (bindings/ruby/exe) runs it.
#
# The gem is a platform gem (like a precompiled native gem): it carries the extension built
# for this machine's Ruby and platform. See docs/ruby.md.

require_relative "bindings/ruby/lib/graphmind/version"

native = File.join(__dir__, "bindings/ruby/lib/graphmind_native.so")
server = File.join(__dir__, "bindings/ruby/libexec/graphmind")
# GRAPHMIND_GEM=source: the source gem, whose extconf.rb compiles the extension and the
# server with cargo at `gem install` (scripts/dist/build.sh stages it with a workspace
# manifest trimmed to the crates it needs).
source_gem = ENV["GRAPHMIND_GEM"] == "source"
if !source_gem && !File.exist?(native) && defined?(Gem::Commands::BuildCommand)
  abort "graphmind.gemspec: #{native} is missing; run `rake compile` first (see docs/ruby.md)"
end

Gem::Specification.new do |spec|
  spec.name = "graphmind"
  spec.version = Graphmind::VERSION
  spec.summary = "GraphMind: a local step-through debugger for AI agents (Ruby SDK on the Rust core)"
  spec.description = "Records runs, LLM and tool calls of a Ruby agent and lets the GraphMind " \
                     "debugger hold, edit, inject, retry or abort them. The rules live in one Rust core."
  spec.authors = ["GraphMind contributors"]
  spec.license = "MIT"
  spec.homepage = "https://github.com/graphmind/graphmind-rs"
  spec.required_ruby_version = ">= 3.1"
  spec.require_paths = ["bindings/ruby/lib"]
  spec.bindir = "bindings/ruby/exe"
  spec.executables = ["graphmind"]
  ruby_files = ["bindings/ruby/exe/graphmind", "docs/ruby.md", "graphmind.gemspec"]
  spec.files = Dir.chdir(__dir__) do
    if source_gem
      spec.extensions = ["bindings/ruby/ext/graphmind/extconf.rb"]
      Dir["bindings/ruby/lib/**/*.rb"] + ruby_files + ["bindings/ruby/ext/graphmind/extconf.rb"] +
        %w[Cargo.toml Cargo.lock] + Dir["{core,cli,examples/rust,bindings/ruby}/{Cargo.toml,build.rs}"] +
        Dir["{core,cli,examples/rust,bindings/ruby}/{src,benches}/**/*"].select { |f| File.file?(f) } + Dir["viewer/dist/**/*"].select { |f| File.file?(f) }
    else
      if File.exist?(native)
        spec.platform = Gem::Platform::CURRENT
        # The extension is compiled against this Ruby's minor version (3.1 here): the gem
        # says so, so that another Ruby installs the source gem instead of failing to load it.
        spec.required_ruby_version = "~> #{RUBY_VERSION[/\A\d+\.\d+/]}.0"
      end
      Dir["bindings/ruby/lib/**/*.rb"] + Dir["bindings/ruby/lib/graphmind_native.so"] + ruby_files +
        (File.exist?(server) ? ["bindings/ruby/libexec/graphmind"] : [])
    end
  end
  spec.metadata["rubygems_mfa_required"] = "true"
end

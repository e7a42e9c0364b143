# frozen_string_literal: true

# The GraphMind gem: the Ruby skin (bindings/ruby/lib) plus the Rust core compiled into
# bindings/ruby/lib/graphmind_native.so. rubygems.org is not needed at any step:
#
#   rake compile                      # cargo build -p graphmind-ruby --release, copies the .so
#   gem build graphmind.gemspec       # -> graphmind-<version>-<platform>.gem (ships the .so)
#   gem install --local graphmind-*.gem
#
# The gem is a platform gem (like a precompiled native gem): it carries the extension built
# for this machine's Ruby and platform. See docs/ruby.md.

require_relative "bindings/ruby/lib/graphmind/version"

native = File.join(__dir__, "bindings/ruby/lib/graphmind_native.so")
if !File.exist?(native) && defined?(Gem::Commands::BuildCommand)
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
  spec.platform = Gem::Platform::CURRENT if File.exist?(native)
  spec.require_paths = ["bindings/ruby/lib"]
  spec.files = Dir.chdir(__dir__) do
    Dir["bindings/ruby/lib/**/*.rb"] + Dir["bindings/ruby/lib/graphmind_native.so"] + ["docs/ruby.md", "graphmind.gemspec"]
  end
  spec.metadata["rubygems_mfa_required"] = "true"
end

# frozen_string_literal: true

module Graphmind
  # The gem's version (the Rust core's version is Graphmind::Native::CORE_VERSION).
  VERSION = "0.1.0"
end

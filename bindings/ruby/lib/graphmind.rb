# frozen_string_literal: true

# GraphMind for Ruby: a thin skin over the Rust core (graphmind_native). Every rule lives
# in the core (fork safety too); this layer maps Ruby idioms (blocks, keyword options in
# seconds, thread locals, at_exit) onto it.

require_relative "graphmind/version"
require "graphmind_native"
require_relative "graphmind/errors"
require_relative "graphmind/options"
require_relative "graphmind/run_context"
require_relative "graphmind/wrap"
require_relative "graphmind/client"
require_relative "graphmind/instrument"
require_relative "graphmind/integrations"
require_relative "graphmind/lifecycle"
require_relative "graphmind/module_api"

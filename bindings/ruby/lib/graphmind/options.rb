# frozen_string_literal: true

module Graphmind
  # Ruby keyword options -> the core's camelCase options. The core's option table does the
  # mapping (names, seconds -> ms, loop_guard fields; `env`, `logger` and `clock` stay
  # here); values are handed over as given and the core validates them and warns.
  module Options
    module_function

    def to_core(options) = Native.core_options(options)

    # The environment snapshot: a Hash given as `env:` (anything not in it is unset), or nil
    # for the process environment, read once by the core.
    def env(options)
      env = options[:env]
      env&.to_h { |k, v| [k.to_s, v.to_s] }
    end
  end
end

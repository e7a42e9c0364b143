# frozen_string_literal: true

module Graphmind
  # Ruby keyword options -> the core's camelCase options (durations: seconds -> ms).
  # Values are handed over as given; the core validates them and warns.
  module Options
    SECONDS = {
      connect_timeout: "connectTimeoutMs", handshake_timeout: "handshakeTimeoutMs",
      retry_interval: "retryIntervalMs", pause_timeout: "pauseTimeoutMs",
      token_interval: "tokenIntervalMs", warn_interval: "warnIntervalMs"
    }.freeze
    PLAIN = {
      url: "url", enabled: "enabled", meta: "meta", app: "appName", sdk: "sdk",
      buffer_size: "bufferSize", max_buffer_bytes: "maxBufferBytes",
      hide_inputs: "hideInputs", hide_outputs: "hideOutputs",
      hide_tool_args: "hideToolArgs", hide_tool_results: "hideToolResults",
      break_on_error_result: "breakOnErrorResult", break_on_truncated: "breakOnTruncated",
      spool_dir: "spoolDir", spool_max_bytes: "spoolMaxBytes"
    }.freeze
    # Taken by the Ruby layer itself, not the core.
    LOCAL = %i[env logger clock].freeze

    module_function

    def camelize(key)
      text = key.to_s
      return text unless text.include?("_")

      head, *rest = text.split("_")
      head + rest.map(&:capitalize).join
    end

    def to_core(options)
      out = {}
      options.each do |key, value|
        sym = key.to_sym
        next if LOCAL.include?(sym)

        if SECONDS.key?(sym)
          out[SECONDS[sym]] = value.is_a?(Numeric) ? value * 1000.0 : value
        elsif PLAIN.key?(sym)
          out[PLAIN[sym]] = value
        elsif sym == :loop_guard
          out["loopGuard"] = value.is_a?(Hash) ? value.to_h { |k, v| [camelize(k), v] } : value
        else
          out[camelize(sym)] = value # the core warns about an unknown option
        end
      end
      out
    end

    # The environment snapshot: a Hash given as `env:` (anything not in it is unset), or nil
    # for the process environment, read once by the core.
    def env(options)
      env = options[:env]
      env&.to_h { |k, v| [k.to_s, v.to_s] }
    end
  end
end

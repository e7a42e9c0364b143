# frozen_string_literal: true

module Graphmind
  # Raised in the app when the debugger (or the app itself, through RunContext#abort!)
  # aborts the run. A wrapper never holds it at an error gate.
  class AbortError < StandardError
    def initialize(message = "aborted from the GraphMind debugger")
      super
    end
  end

  # A tool or model call's error raised again by a replay (docs/replay.md): the recorded
  # execution raised it. `name`, `message` and `recorded_stack` are the recorded ones. Each
  # recorded name that is a constant name gets its own subclass under Graphmind::Replayed
  # (`ArgumentError` -> Graphmind::Replayed::ArgumentError, `ValueError` recorded by Python
  # -> Graphmind::Replayed::ValueError), so `rescue Graphmind::ReplayedError` catches every
  # replayed error and `e.class.name` still tells which one it was.
  class ReplayedError < StandardError
    attr_reader :name, :recorded_stack

    def initialize(name, message, stack = nil)
      super(message)
      @name = name
      @recorded_stack = stack
    end

    # The exception a replay raises for the recorded error `name`, `message`, `stack`.
    def self.build(name, message, stack = nil)
      name = name.to_s
      klass = if name.match?(/\A[A-Z][A-Za-z0-9_]*\z/)
                Replayed.const_defined?(name, false) ? Replayed.const_get(name, false) : Replayed.const_set(name, Class.new(self))
              else
                self
              end
      klass.new(name, message.to_s, stack)
    end
  end

  # The classes of replayed errors, one per recorded error name (see ReplayedError.build).
  module Replayed
  end
end

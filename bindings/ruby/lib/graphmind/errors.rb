# frozen_string_literal: true

module Graphmind
  # Raised in the app when the debugger (or the app itself, through RunContext#abort!)
  # aborts the run. A wrapper never holds it at an error gate.
  class AbortError < StandardError
    def initialize(message = "aborted from the GraphMind debugger")
      super
    end
  end
end

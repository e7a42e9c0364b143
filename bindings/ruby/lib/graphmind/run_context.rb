# frozen_string_literal: true

module Graphmind
  # One run, as the block of Graphmind.run sees it. `aborted?` turns true when the
  # debugger aborts the run (or the app calls abort!): code GraphMind does not wrap can
  # poll it.
  class RunContext
    attr_reader :native, :run_id, :name

    # The id and name never change: read once (every wrapped call passes the id).
    def initialize(native)
      @native = native
      @run_id = native.run_id.freeze
      @name = native.name.freeze
    end

    def aborted? = @native.aborted?
    def reason = @native.reason

    def abort!(reason = nil)
      @native.abort!((reason || "aborted by the app").to_s)
      nil
    end

    def to_s = "#<Graphmind::RunContext #{name} #{run_id}#{aborted? ? ' aborted' : ''}>"
    alias inspect to_s
  end

  # Yielded by Graphmind.span: `span.output = ...` names what the node produced.
  class Span
    attr_reader :output

    def initialize
      @output = nil
      @set = false
    end

    def output=(value)
      @output = value
      @set = true
    end

    def output_set? = @set
  end

  # Graphmind.stats.
  Stats = Struct.new(:enabled, :attached, :buffered, :dropped, :lost, :pending_gaps,
                     :held_gates, :seq, keyword_init: true)
end

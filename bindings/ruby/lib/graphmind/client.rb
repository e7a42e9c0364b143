# frozen_string_literal: true

module Graphmind
  # One debugger attachment point (Graphmind.configure makes the process-wide one).
  # Everything is a no-op when no debugger is attached, and nothing at all when disabled.
  class Client
    # Fiber-local (thread-local under Puma/Sidekiq): the run a block belongs to.
    RUN_KEY = :graphmind_run_context
    # Graphmind.ready's default wait, in seconds.
    DEFAULT_READY_TIMEOUT = 2.0

    attr_reader :native, :logger

    def initialize(app: nil, sdk: nil, **options)
      @logger = options[:logger]
      core = Options.to_core(options)
      core["appName"] = (app || default_app_name).to_s
      core["sdk"] = sdk if sdk
      @native = Native::Session.new(core, Options.env(options), !@logger.nil?)
      @client_of = -> { self }
      @disposed = false
      Lifecycle.register(self)
      flush_warnings
    end

    def session = @native
    def enabled? = @native.enabled?
    def attached? = @native.attached?
    def disposed? = @disposed
    def config = @native.config
    def url = config["url"]

    # Waits up to `timeout` seconds for a debugger (GVL released). false: carry on detached.
    def ready(timeout = DEFAULT_READY_TIMEOUT)
      @native.ready(timeout.to_f)
    ensure
      flush_warnings
    end

    # A run: `Graphmind.run("name") { |ctx| ... }`. Returns the block's value; its errors
    # propagate untouched (and finish the run as error, or aborted for an AbortError).
    def run(name, meta: nil)
      native_run = @native.start_run(name.to_s, meta)
      ctx = RunContext.new(native_run)
      previous = Thread.current[RUN_KEY]
      Thread.current[RUN_KEY] = ctx
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      @native.agent_node_started(native_run)
      finished = false
      begin
        yield ctx
      rescue Exception => e # rubocop:disable Lint/RescueException
        status = e.is_a?(AbortError) ? :aborted : :error
        @native.agent_node_finished(native_run, elapsed_ms(started), status, e)
        @native.finish_run(native_run, status, e)
        finished = true
        raise
      ensure
        Thread.current[RUN_KEY] = previous
        unless finished
          @native.agent_node_finished(native_run, elapsed_ms(started), :ok, nil)
          @native.finish_run(native_run, :ok, nil)
        end
        flush_warnings
      end
    end

    def current_run = Thread.current[RUN_KEY]

    def with_run_context(ctx)
      previous = Thread.current[RUN_KEY]
      Thread.current[RUN_KEY] = ctx
      yield
    ensure
      Thread.current[RUN_KEY] = previous
    end

    def clear_run_context
      Thread.current[RUN_KEY] = nil
    end

    # The error raised after an `abort`.
    def abort_error(ctx = current_run)
      reason = ctx&.reason
      reason ? AbortError.new(reason) : AbortError.new
    end

    # An arbitrary gated node; the block's value (or `span.output = ...`) is its output.
    def span(name, kind: "custom", input: nil, parent_id: nil)
      holder = Span.new
      Wrap.invoke(self, kind: kind.to_s, name: name.to_s, parent_id: parent_id, input: input) do
        value = yield holder
        holder.output_set? ? holder.output : value
      end
    end

    # A block as a gated tool: `search = gm.tool("search") { |query:| ... }`.
    def tool(name = nil, kind: "tool", parent_id: nil, &block)
      raise ArgumentError, "Graphmind.tool needs a block" if block.nil?

      Wrap.gate_callable(block, @client_of, name: name, kind: kind, parent_id: parent_id)
    end

    # Any callable (Proc, Method, an object with #call) as a gated tool.
    def wrap(callable, name: nil, kind: "tool", node_id: nil, parent_id: nil)
      Wrap.gate_callable(callable, @client_of, name: name, kind: kind, node_id: node_id, parent_id: parent_id)
    end

    def wrap_tools(tools) = Wrap.wrap_tools(tools, @client_of)

    def wrap_method(target, method_name, name: nil, kind: "tool", parent_id: nil)
      Wrap.wrap_method(target, method_name, @client_of, name: name, kind: kind, parent_id: parent_id)
    end

    def instrument_openai(client, **options) = Integrations::RubyOpenAI.instrument(client, @client_of, **options)
    def instrument_ruby_llm(chat, **options) = Integrations::RubyLLM.instrument(chat, @client_of, **options)

    # A raw event (node.started, node.token, node.finished, node.error, graph.hint, ...)
    # into the current run (or the implicit one). Returns its seq, or nil.
    def emit(type, payload)
      @native.emit(current_run&.run_id, type.to_s, payload)
    end

    def graph_hint(nodes) = emit("graph.hint", { "nodes" => Array(nodes) })

    def stats
      flush_warnings
      Stats.new(**@native.stats)
    end

    # Waits up to `timeout` seconds (default: the core's exit bound, connect + handshake
    # timeouts plus the delivery) until every event emitted so far reached the debugger, a
    # connection never tried being tried first.
    def flush(timeout = @native.exit_deadline) = @native.flush(timeout.to_f)

    # Releases held gates, finishes the implicit run, flushes and closes, within `deadline`
    # (default: the core's exit bound, so a connection in flight or never tried is waited
    # for and the ring delivered).
    def dispose(deadline = @native.exit_deadline)
      return nil if @disposed

      @disposed = true
      Lifecycle.unregister(self)
      @native.dispose(deadline.to_f)
      flush_warnings
      nil
    end

    # Hands the core's queued warnings to `logger:` (they are written to stderr otherwise).
    def flush_warnings
      return if @logger.nil?

      @native.take_warnings.each do |line|
        @logger.warn(line)
      rescue StandardError
        nil
      end
    end

    private

    def default_app_name
      if defined?(::Rails) && ::Rails.respond_to?(:application) && ::Rails.application
        ::Rails.application.class.name.to_s.split("::").first.to_s.downcase
      else
        File.basename(Dir.pwd)
      end
    rescue StandardError
      "ruby"
    end

    # Milliseconds since the monotonic `started`.
    def elapsed_ms(started)
      (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000.0
    end
  end
end

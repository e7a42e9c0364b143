# frozen_string_literal: true

module Graphmind
  # The "no input given" default of Graphmind.fingerprint.
  NO_INPUT = Object.new.freeze

  @default = nil
  @default_mutex = Mutex.new

  class << self
    # Creates (or replaces, disposing the previous one) the process-wide instance.
    # `app:`, `sdk:` and every option in docs/ruby.md.
    def configure(**options)
      previous = nil
      client = nil
      @default_mutex.synchronize do
        previous = @default
        client = Client.new(**options)
        @default = client
      end
      previous&.dispose
      client
    end
    alias init configure

    # The process-wide instance, created with defaults on first use.
    def instance
      @default || @default_mutex.synchronize { @default ||= Client.new }
    end

    def configured? = !@default.nil?

    # Disposes and forgets the process-wide instance.
    def reset
      previous = @default_mutex.synchronize { @default.tap { @default = nil } }
      previous&.dispose
      nil
    end

    def session = instance.session
    def enabled? = instance.enabled?
    def attached? = instance.attached?
    def ready(timeout = Client::DEFAULT_READY_TIMEOUT) = instance.ready(timeout)
    def run(name, meta: nil, &block) = instance.run(name, meta: meta, &block)
    def span(name, **kwargs, &block) = instance.span(name, **kwargs, &block)
    def tool(name = nil, **kwargs, &block) = instance.tool(name, **kwargs, &block)
    def wrap(callable, **kwargs) = instance.wrap(callable, **kwargs)
    def wrap_tools(tools) = instance.wrap_tools(tools)
    def wrap_method(target, method_name, **kwargs) = instance.wrap_method(target, method_name, **kwargs)
    def instrument_openai(client, **kwargs) = instance.instrument_openai(client, **kwargs)
    def instrument_ruby_llm(chat, **kwargs) = instance.instrument_ruby_llm(chat, **kwargs)
    def emit(type, payload) = instance.emit(type, payload)
    def graph_hint(nodes) = instance.graph_hint(nodes)
    def current_run = instance.current_run
    def with_run_context(ctx, &block) = instance.with_run_context(ctx, &block)
    def clear_run_context = instance.clear_run_context
    def stats = instance.stats
    def dispose = instance.dispose
    # Waits (default: the core's exit bound) until what was recorded reached the debugger.
    def flush(*timeout) = instance.flush(*timeout)

    # The loop guard's canonical JSON of a value (keys sorted by UTF-16 code units).
    # `ignore_keys: nil` uses the loop guard's default list.
    def canonical_json(value, ignore_keys: nil) = Native.canonical_json(value, ignore_keys)

    # The loop guard's fingerprint of a call (node id + canonical input). Without `input`
    # the call has no input, which differs from an input of nil (JSON null).
    def fingerprint(node_id, input = NO_INPUT, ignore_keys: nil)
      absent = NO_INPUT.equal?(input)
      Native.fingerprint(node_id.to_s, absent ? nil : input, absent, ignore_keys)
    end
  end
end

# frozen_string_literal: true

module Graphmind
  # Drives the core's Step (one gated call) from Ruby: the core says what each gate's
  # decision means ([:run], [:run, edited], [:result], [:inject, v], [:reraise], [:abort],
  # and a replayed call's recorded error [:raise, name, message, stack]);
  # this module only calls the block, raises, or returns accordingly.
  module Wrap
    # Positional arguments beyond the named parameters shown in a node's input.
    MAX_ARGS_PREVIEW = 32
    NO_EDIT = Object.new.freeze

    module_function

    # Runs `body` (called with the edited input, or NO_EDIT) as one gated node.
    def invoke(client, kind:, name:, node_id: nil, parent_id: nil, input: nil, editable: false,
               output_for: nil, inject_as: nil, &body)
      native = client&.native
      return body.call(NO_EDIT) if native.nil? || !native.enabled?

      ctx = client.current_run
      step = native.step(ctx&.run_id, kind.to_s, name.to_s, node_id, parent_id, input, editable)
      drive(client, step, ctx, output_for, inject_as, &body)
    end

    # The hot path (detached, or attached without a pause) is straight-line: one native
    # call per gate, a `while` instead of `loop`, and the gate's answer compared by its tag.
    def drive(client, step, ctx, output_for, inject_as, &body)
      result = nil
      error = nil
      edited = NO_EDIT
      nxt = step.before
      while true # rubocop:disable Style/InfiniteLoop
        case nxt[0]
        when :run
          edited = nxt[1] if nxt.length > 1
          begin
            result = body.call(edited)
          rescue Exception => e # rubocop:disable Lint/RescueException
            raise unless gateable?(e)

            error = e
            nxt = step.error(e)
            next
          end
          output = output_for ? project(output_for, result) : result
          nxt = step.after(output)
        when :result then return result
        when :inject then return coerce(inject_as, nxt[1])
        when :reraise then raise error
        when :abort then raise client.abort_error(ctx)
        when :raise then raise ReplayedError.build(nxt[1], nxt[2], nxt[3])
        end
      end
    rescue Exception => e # rubocop:disable Lint/RescueException
      # An abort, an interrupt, or a non-StandardError: never held; the node ends.
      step.ungated(e.is_a?(AbortError))
      raise
    end

    def gateable?(error) = error.is_a?(StandardError) && !error.is_a?(AbortError)

    def coerce(coercer, value)
      coercer ? coercer.call(value) : value
    rescue StandardError
      value
    end

    def project(mapper, result)
      mapper.call(result)
    rescue StandardError
      nil
    end

    # A node's input: arguments keyed by parameter name where the callable names them.
    def describe(parameters, args, kwargs) = describe_planned(plan(parameters), args, kwargs)

    # A callable's parameters read once for describe: [type, frozen key] pairs (a frozen
    # key goes into the input Hash without the copy Hash#[]= makes of a mutable one).
    def plan(parameters)
      Array(parameters).map do |type, pname|
        [type, (type == :rest ? (pname || :args) : pname).to_s.freeze]
      end.freeze
    rescue StandardError
      [].freeze
    end

    # describe with the parameters already planned.
    def describe_planned(plan, args, kwargs)
      out = {}
      index = 0
      count = args.length
      i = 0
      while i < plan.length
        type, key = plan[i]
        if type == :req || type == :opt
          break if index >= count

          out[key] = args[index]
          index += 1
        elsif type == :rest
          out[key] = args[index..] if index < count
          index = count
        end
        i += 1
      end
      out["args"] = args[index, MAX_ARGS_PREVIEW] if index < count
      kwargs.each { |k, v| out[k.is_a?(Symbol) ? k.name : k.to_s] = v } unless kwargs.empty?
      out
    rescue StandardError
      { "args" => Array(args).first(MAX_ARGS_PREVIEW) }
    end

    # The arguments for an edited input (the inverse of describe).
    def arguments(parameters, edited, args, kwargs)
      return [args, kwargs] unless edited.is_a?(Hash)

      new_args = []
      new_kwargs = {}
      rest_taken = false
      Array(parameters).each do |type, pname|
        key = pname.to_s
        case type
        when :req, :opt then new_args << edited[key] if edited.key?(key)
        when :rest then (new_args.concat(Array(edited[key || "args"])); rest_taken = true) if edited.key?(key || "args")
        when :key, :keyreq then new_kwargs[pname] = edited[key] if edited.key?(key)
        end
      end
      new_args.concat(Array(edited["args"])) if !rest_taken && edited.key?("args")
      if parameters.any? { |type, _| type == :keyrest }
        named = Array(parameters).map { |_, n| n.to_s }
        edited.each { |k, v| new_kwargs[k.to_sym] = v unless named.include?(k) || k == "args" }
      end
      [new_args, new_kwargs]
    end

    def callable_name(callable)
      name = callable.respond_to?(:name) ? callable.name : nil
      name ? name.to_s : "callable"
    rescue StandardError
      "callable"
    end

    def parameters_of(callable)
      callable.respond_to?(:parameters) ? callable.parameters : []
    rescue StandardError
      []
    end

    def wrapped?(callable)
      callable.is_a?(GatedCallable) ||
        (callable.respond_to?(:graphmind_wrapped?) && callable.graphmind_wrapped?)
    end

    def gate_callable(callable, client_of, **kwargs)
      return callable if callable.is_a?(GatedCallable)

      GatedCallable.new(callable, client_of, **kwargs)
    end

    # A Hash of name => callable, an Array of callables, or one callable: same shape out.
    def wrap_tools(tools, client_of)
      case tools
      when Hash
        tools.to_h { |key, fn| [key, wrapped?(fn) ? fn : gate_callable(fn, client_of, name: key.to_s)] }
      when Array
        tools.map { |fn| wrapped?(fn) ? fn : gate_callable(fn, client_of) }
      else
        raise ArgumentError, "wrap_tools expects a callable, an Array, or a {name => callable} Hash" unless tools.respond_to?(:call)

        gate_callable(tools, client_of)
      end
    end

    # Gates one method of one object, in place.
    def wrap_method(target, method_name, client_of, name: nil, kind: "tool", parent_id: nil)
      gated = gate_callable(target.method(method_name), client_of, name: name || method_name.to_s,
                                                                   kind: kind, parent_id: parent_id)
      target.define_singleton_method(method_name) do |*args, **kwargs, &block|
        gated.call(*args, **kwargs, &block)
      end
      target
    end
  end

  # A callable behind GraphMind gates; quacks like the original (#call, #[], #to_proc,
  # #arity, #parameters).
  class GatedCallable
    attr_reader :name, :node_id, :kind, :original

    def initialize(callable, client_of, name: nil, kind: "tool", node_id: nil, parent_id: nil)
      @original = callable
      @client_of = client_of
      @name = (name || Wrap.callable_name(callable)).to_s
      @kind = kind.to_s
      @node_id = node_id
      @parent_id = parent_id
      @parameters = Wrap.parameters_of(callable)
      @plan = Wrap.plan(@parameters)
    end

    # Wrap.invoke inlined (this is the per-call path of every wrapped tool).
    def call(*args, **kwargs, &block)
      client = @client_of.call
      native = client&.native
      return invoke_original(args, kwargs, block) if native.nil? || !native.enabled?

      ctx = client.current_run
      step = native.step(ctx&.run_id, @kind, @name, @node_id, @parent_id,
                         Wrap.describe_planned(@plan, args, kwargs), true)
      Wrap.drive(client, step, ctx, nil, nil) do |edited|
        if edited.equal?(Wrap::NO_EDIT)
          invoke_original(args, kwargs, block)
        else
          a, k = Wrap.arguments(@parameters, edited, args, kwargs)
          invoke_original(a, k, block)
        end
      end
    end

    alias [] call
    alias === call

    def to_proc = method(:call).to_proc
    def arity = @original.respond_to?(:arity) ? @original.arity : -1
    def parameters = @parameters
    def graphmind_wrapped? = true

    def respond_to_missing?(symbol, include_private = false)
      @original.respond_to?(symbol, include_private) || super
    end

    private def invoke_original(args, kwargs, block)
      kwargs.empty? ? @original.call(*args, &block) : @original.call(*args, **kwargs, &block)
    end

    def method_missing(symbol, ...)
      return @original.public_send(symbol, ...) if @original.respond_to?(symbol)

      super
    end
  end
end

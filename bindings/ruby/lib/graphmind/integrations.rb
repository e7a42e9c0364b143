# frozen_string_literal: true

module Graphmind
  # Provider clients gated in place (only the instance given; nothing global is patched).
  module Integrations
    # The node every LLM round-trip records under.
    LLM_NAME = "step"

    module_function

    def param(hash, key)
      return nil unless hash.is_a?(Hash)

      hash.key?(key) ? hash[key] : hash[key.to_s]
    end

    # One model call driven by the core's LLM step: the core says what each gate's decision
    # means and hands an injected value back already in the provider's shape. `send` sends
    # the request; `reply` turns that shape into the client's own type.
    module ModelCall
      module_function

      # Runs one call (`answer` reads a result into what the core records); `stream` true when the answer arrives through the client's stream
      # callback (then there is no `after` gate and the step ends when the request returns).
      # A replayed call is answered at once: `reply` gets the rebuilt reply, `replay_stream`
      # the rebuilt chunks of a streamed one, and a recorded error is raised.
      def run(client, step, ctx, reply:, answer: nil, stream: false, replay_stream: nil, &send)
        nxt = step.before
        error = nil
        result = nil
        while true # rubocop:disable Style/InfiniteLoop
          case nxt[0]
          when :inject then return reply.call(nxt[1])
          when :abort then raise client.abort_error(ctx)
          when :reraise then raise error
          when :result then return result
          when :raise then raise ReplayedError.build(nxt[1], nxt[2], nxt[3])
          when :stream then return replay_stream.call(nxt[1])
          end
          begin
            step.stream_started if stream
            result = send.call
          rescue Exception => e # rubocop:disable Lint/RescueException
            raise unless Wrap.gateable?(e)

            if stream
              step.stream_end(e, false, nil)
              raise
            end
            error = e
            nxt = step.error(e)
            nxt = step.before if nxt[0] == :run
            next
          end
          if stream
            step.stream_end(nil, false, nil)
            return result
          end
          recorded = answer ? answer.call(result) : result
          nxt = step.after(recorded)
          nxt = step.before if nxt[0] == :run
        end
      rescue Exception => e # rubocop:disable Lint/RescueException
        step.ungated(e.is_a?(AbortError)) unless step.finished?
        raise
      end

      def start(client, api, request, sdk)
        native = client&.native
        return nil if native.nil? || !native.enabled?

        ctx = client.current_run
        [Native.llm_step(native, ctx&.run_id, ctx&.name, api, request, sdk), ctx]
      rescue StandardError
        nil
      end
    end

    # ruby-openai: OpenAI::Client#chat(parameters:) and #responses.create(parameters:). A
    # `stream:` proc is wrapped so each chunk reaches the core as the app receives it.
    # (rubygems.org is not reachable from CI: the tests drive a duck-typed stand-in client.)
    module RubyOpenAI
      MARKER = :@__graphmind_openai
      SDK = "ruby-openai"

      module_function

      def instrument(client, client_of, name: LLM_NAME)
        return client if client.nil? || client.instance_variable_get(MARKER)

        client.instance_variable_set(MARKER, { client_of: client_of, name: name })
        client.singleton_class.prepend(ClientPatch)
        client
      end

      def call(config, parameters, api, &body)
        client = config[:client_of].call
        user_stream = Integrations.param(parameters, :stream)
        streamed = user_stream.respond_to?(:call)
        request = streamed ? parameters.merge(stream: true) : parameters
        started = ModelCall.start(client, api, request, SDK)
        return body.call(parameters) if started.nil?

        step, ctx = started
        sent = parameters
        if streamed
          key = parameters.key?(:stream) ? :stream : "stream"
          sent = parameters.merge(key => proc do |chunk, *rest|
            step.chunk(chunk)
            user_stream.call(chunk, *rest)
          end)
        end
        ModelCall.run(client, step, ctx, reply: ->(v) { v }, stream: streamed,
                                         replay_stream: ->(chunks) { replay_stream(chunks, user_stream) }) { body.call(sent) }
      end

      # A replayed stream: each rebuilt chunk (a Hash as ruby-openai parses an SSE event)
      # handed to the app's `stream:` proc, then what ruby-openai returns for a stream.
      def replay_stream(chunks, user_stream)
        chunks.each { |chunk| user_stream.call(chunk) }
        {}
      end

      module ClientPatch
        def chat(parameters: {})
          config = instance_variable_get(MARKER)
          RubyOpenAI.call(config, parameters, "openai-chat") { |sent| super(parameters: sent) }
        end

        def responses
          object = super
          config = instance_variable_get(MARKER)
          unless object.nil? || object.instance_variable_get(MARKER)
            object.instance_variable_set(MARKER, config)
            object.singleton_class.prepend(ResponsesPatch)
          end
          object
        end
      end

      module ResponsesPatch
        def create(parameters: {})
          config = instance_variable_get(MARKER)
          RubyOpenAI.call(config, parameters, "openai-responses") { |sent| super(parameters: sent) }
        end
      end
    end

    # ruby_llm: a RubyLLM::Chat's provider round-trip (provider_completion, complete_once or
    # complete, whichever this version has) and each of its tools' #call.
    module RubyLLM
      CHAT_MARKER = :@__graphmind_ruby_llm_chat
      TOOL_MARKER = :@__graphmind_ruby_llm_tool
      HOOKS = %i[provider_completion complete_once complete].freeze

      module_function

      def instrument(chat, client_of, name: LLM_NAME, tools: true)
        return chat if chat.nil?

        config = chat.instance_variable_get(CHAT_MARKER)
        if config.nil?
          hook = HOOKS.find { |candidate| chat.respond_to?(candidate, true) }
          config = { client_of: client_of, name: name, hook: hook, run: nil }
          chat.instance_variable_set(CHAT_MARKER, config)
          chat.singleton_class.prepend(hook_patch(hook)) if hook
          chat.singleton_class.prepend(RegistrationPatch) if tools
        end
        instrument_tools(chat, config) if tools
        chat
      end

      def hook_patch(hook)
        Module.new do
          define_method(hook) do |*args, **kwargs, &block|
            config = instance_variable_get(CHAT_MARKER)
            Graphmind::Integrations::RubyLLM.call_llm(config, self) { super(*args, **kwargs, &block) }
          end
        end
      end

      def instrument_tools(chat, config)
        registry = chat.respond_to?(:tools) ? chat.tools : nil
        registry.each_value { |tool| instrument_tool(tool, config) } if registry.respond_to?(:each_value)
      rescue StandardError
        nil
      end

      def instrument_tool(tool, config)
        return if tool.nil? || tool.instance_variable_get(TOOL_MARKER)

        name = tool.respond_to?(:name) ? tool.name.to_s : tool.class.name.to_s
        tool.instance_variable_set(TOOL_MARKER, { chat: config, name: name })
        tool.singleton_class.prepend(ToolPatch)
      end

      def call_llm(config, chat, &body)
        client = config[:client_of].call
        config[:run] = client&.current_run
        started = ModelCall.start(client, "ruby_llm", request_of(chat), "ruby_llm")
        return body.call if started.nil?

        step, ctx = started
        ModelCall.run(client, step, ctx, reply: ->(v) { to_message(v) }, answer: ->(m) { message_hash(m) }) { body.call }
      end

      # The chat's request as a Hash: model, messages, the tools offered.
      def request_of(chat)
        out = {}
        out["model"] = chat.model.id.to_s if chat.respond_to?(:model) && chat.model.respond_to?(:id)
        out["messages"] = chat.messages.map { |m| message_hash(m) } if chat.respond_to?(:messages)
        tools = chat.respond_to?(:tools) ? chat.tools : nil
        if tools.respond_to?(:values) && !tools.empty?
          out["tools"] = tools.values.map do |t|
            { "name" => t.respond_to?(:name) ? t.name.to_s : t.class.name.to_s,
              "description" => t.respond_to?(:description) ? t.description.to_s : nil }.compact
          end
        end
        out
      rescue StandardError
        {}
      end

      # A RubyLLM::Message (or anything answering its readers) as a Hash.
      def message_hash(message)
        return message if message.is_a?(Hash)

        out = {}
        %i[role content model_id input_tokens output_tokens cached_tokens cache_creation_tokens
           thinking_tokens].each do |reader|
          next unless message.respond_to?(reader)

          value = message.public_send(reader)
          value = value.to_s if reader == :role && !value.nil?
          value = text_of(value) if reader == :content && !value.nil?
          out[reader.to_s] = value unless value.nil?
        end
        if message.respond_to?(:tool_calls) && message.tool_calls.respond_to?(:each_value)
          out["tool_calls"] = message.tool_calls.each_value.map do |c|
            { "id" => c.respond_to?(:id) ? c.id : nil, "name" => c.respond_to?(:name) ? c.name.to_s : nil,
              "arguments" => c.respond_to?(:arguments) ? c.arguments : nil }
          end
        end
        out
      end

      def text_of(content)
        return content if content.is_a?(String)

        content.respond_to?(:text) ? content.text.to_s : content.to_s
      end

      # The core's reply (`{role, content}`) as a RubyLLM::Message when the gem is loaded.
      def to_message(reply)
        return reply unless defined?(::RubyLLM::Message) && reply.is_a?(Hash)

        ::RubyLLM::Message.new(reply.to_h { |k, v| [k.to_sym, k.to_s == "role" ? v.to_sym : v] })
      rescue StandardError
        reply
      end

      module RegistrationPatch
        def with_tool(*args, **kwargs, &block)
          result = super
          config = instance_variable_get(CHAT_MARKER)
          Graphmind::Integrations::RubyLLM.instrument_tools(self, config) if config
          result
        end

        def with_tools(*args, **kwargs, &block)
          result = super
          config = instance_variable_get(CHAT_MARKER)
          Graphmind::Integrations::RubyLLM.instrument_tools(self, config) if config
          result
        end
      end

      # A gated tool call: `inject` replaces the result the model sees next. A tool run on
      # ruby_llm's own thread pool lands in the run the chat was completing.
      module ToolPatch
        def call(args)
          config = instance_variable_get(TOOL_MARKER)
          chat = config[:chat]
          client = chat[:client_of].call
          gated = lambda do
            Graphmind::Wrap.invoke(client, kind: "tool", name: config[:name], input: args) { super(args) }
          end
          return gated.call if client.nil? || client.current_run || chat[:run].nil?

          client.with_run_context(chat[:run]) { gated.call }
        end
      end
    end
  end
end

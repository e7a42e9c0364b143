# frozen_string_literal: true

module Graphmind
  # Provider clients gated in place (only the instance given; nothing global is patched).
  module Integrations
    # The node every LLM round-trip records under.
    LLM_NAME = "step"
    # Characters of one message kept in an LLM node's input.
    MAX_TEXT = 2000

    module_function

    def truncate(text)
      text = text.to_s
      text.length > MAX_TEXT ? "#{text[0, MAX_TEXT]}…" : text
    end

    def param(hash, key)
      return nil unless hash.is_a?(Hash)

      hash.key?(key) ? hash[key] : hash[key.to_s]
    end

    # ruby-openai: OpenAI::Client#chat(parameters:) and #responses.create(parameters:).
    module RubyOpenAI
      MARKER = :@__graphmind_openai

      module_function

      def instrument(client, client_of, name: LLM_NAME)
        return client if client.nil? || client.instance_variable_get(MARKER)

        client.instance_variable_set(MARKER, { client_of: client_of, name: name })
        client.singleton_class.prepend(ClientPatch)
        client
      end

      def call(config, parameters, operation, &body)
        Graphmind::Wrap.invoke(config[:client_of].call, kind: "llm", name: config[:name],
                                                        input: describe(parameters, operation),
                                                        output_for: ->(r) { summarize(r) },
                                                        inject_as: ->(v) { coerce(v, operation) }) { body.call }
      end

      def describe(parameters, operation)
        out = { "operation" => operation }
        model = Integrations.param(parameters, :model)
        out["model"] = model unless model.nil?
        messages = Integrations.param(parameters, :messages)
        if messages.is_a?(Array)
          out["messages"] = messages.map do |m|
            { "role" => Integrations.param(m, :role).to_s, "content" => Integrations.truncate(Integrations.param(m, :content)) }
          end
        end
        input = Integrations.param(parameters, :input)
        out["input"] = Integrations.truncate(input) if input.is_a?(String)
        tools = Integrations.param(parameters, :tools)
        if tools.is_a?(Array)
          out["tools"] = tools.filter_map do |t|
            fn = Integrations.param(t, :function)
            Integrations.param(fn || t, :name)
          end
        end
        out
      rescue StandardError
        { "operation" => operation }
      end

      def summarize(response)
        return Integrations.truncate(response) unless response.is_a?(Hash)

        message = response.dig("choices", 0, "message")
        out = {}
        text = message.is_a?(Hash) ? message["content"] : nil
        text ||= output_text(response)
        out["text"] = Integrations.truncate(text) if text.is_a?(String)
        calls = message.is_a?(Hash) ? message["tool_calls"] : nil
        out["toolCalls"] = calls if calls.is_a?(Array) && !calls.empty?
        out["finishReason"] = response.dig("choices", 0, "finish_reason") if response.dig("choices", 0, "finish_reason")
        %w[id model usage].each { |k| out[k] = response[k] if response[k] }
        out
      end

      def output_text(response)
        Array(response["output"]).flat_map { |item| item.is_a?(Hash) ? Array(item["content"]) : [] }
                                 .filter_map { |part| part["text"] if part.is_a?(Hash) }.join.then { |t| t.empty? ? nil : t }
      end

      # An injected reply typed in the viewer as plain text becomes a response-shaped Hash.
      def coerce(value, operation)
        return value unless value.is_a?(String)

        if operation == "responses.create"
          { "id" => "graphmind-injected", "object" => "response",
            "output" => [{ "type" => "message", "role" => "assistant",
                           "content" => [{ "type" => "output_text", "text" => value }] }] }
        else
          { "id" => "graphmind-injected", "object" => "chat.completion",
            "choices" => [{ "index" => 0, "finish_reason" => "stop",
                            "message" => { "role" => "assistant", "content" => value } }] }
        end
      end

      module ClientPatch
        def chat(parameters: {})
          config = instance_variable_get(MARKER)
          RubyOpenAI.call(config, parameters, "chat.completions") { super(parameters: parameters) }
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
          RubyOpenAI.call(config, parameters, "responses.create") { super(parameters: parameters) }
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
        Graphmind::Wrap.invoke(client, kind: "llm", name: config[:name], input: describe(chat, config),
                                       output_for: ->(m) { summarize(m) }, inject_as: ->(v) { coerce(v) }) { body.call }
      end

      def describe(chat, config)
        out = { "hook" => config[:hook].to_s }
        out["model"] = chat.model.id.to_s if chat.respond_to?(:model) && chat.model.respond_to?(:id)
        if chat.respond_to?(:messages)
          out["messages"] = chat.messages.map do |m|
            { "role" => m.role.to_s, "content" => Integrations.truncate(text_of(m.content)) }
          end
        end
        tools = chat.respond_to?(:tools) ? chat.tools : nil
        out["tools"] = tools.keys.map(&:to_s) if tools.respond_to?(:keys) && !tools.empty?
        out
      rescue StandardError
        { "hook" => config[:hook].to_s }
      end

      def text_of(content)
        return content if content.is_a?(String)

        content.respond_to?(:text) ? content.text.to_s : content.to_s
      end

      def summarize(message)
        return nil if message.nil?

        out = {}
        out["text"] = Integrations.truncate(text_of(message.content)) if message.respond_to?(:content)
        if message.respond_to?(:tool_calls) && message.tool_calls.respond_to?(:keys) && !message.tool_calls.empty?
          out["toolCalls"] = message.tool_calls.keys.map(&:to_s)
        end
        out["model"] = message.model_id.to_s if message.respond_to?(:model_id) && message.model_id
        if message.respond_to?(:input_tokens) && message.respond_to?(:output_tokens) && message.input_tokens
          out["usage"] = { "inputTokens" => message.input_tokens, "outputTokens" => message.output_tokens }
        end
        out
      end

      # An injected reply becomes a RubyLLM::Message when the gem is loaded.
      def coerce(value)
        return value unless defined?(::RubyLLM::Message)
        return value if value.is_a?(::RubyLLM::Message)

        if value.is_a?(Hash)
          attrs = value.to_h { |k, v| [k.to_sym, v] }
          attrs[:role] ||= :assistant
          attrs[:content] ||= ""
          return ::RubyLLM::Message.new(attrs)
        end
        ::RubyLLM::Message.new(role: :assistant, content: value.to_s)
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

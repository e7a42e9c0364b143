# frozen_string_literal: true

module Graphmind
  # `include Graphmind::Instrument` then `graphmind_tool :search, :book`: every instance of
  # the class is gated at tool:search / tool:book (through Graphmind.instance, or the
  # `client:` lambda given).
  module Instrument
    def self.included(base)
      base.extend(ClassMethods)
    end

    module ClassMethods
      def graphmind_tool(*method_names, kind: "tool", client: nil)
        gates = (@graphmind_gates ||= Module.new.tap { |mod| prepend(mod) })
        method_names.each do |method_name|
          node_name = method_name.to_s
          gates.define_method(method_name) do |*args, **kwargs, &block|
            active = client ? client.call : Graphmind.instance
            parameters = begin
              method(method_name).super_method&.parameters || []
            rescue StandardError
              []
            end
            Graphmind::Wrap.invoke(active, kind: kind, name: node_name, editable: true,
                                           input: Graphmind::Wrap.describe(parameters, args, kwargs)) do |edited|
              a, k = if edited.equal?(Graphmind::Wrap::NO_EDIT)
                       [args, kwargs]
                     else
                       Graphmind::Wrap.arguments(parameters, edited, args, kwargs)
                     end
              k.empty? ? super(*a, &block) : super(*a, **k, &block)
            end
          end
        end
        method_names
      end
    end
  end
end

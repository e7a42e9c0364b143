# frozen_string_literal: true

module Graphmind
  # Process-level hooks: fork safety (Process._fork, Ruby 3.1+) and dispose at exit.
  module Lifecycle
    @clients = []
    @mutex = Mutex.new

    class << self
      def register(client) = @mutex.synchronize { @clients << client }
      def unregister(client) = @mutex.synchronize { @clients.delete(client) }
      def clients = @mutex.synchronize { @clients.dup }

      # at_exit: every live client is disposed within its deadline; never hangs the exit.
      def dispose_all
        clients.each do |client|
          client.dispose
        rescue StandardError
          nil
        end
      end
    end

    # Prepended to Process's singleton class: the core's fork protocol around every fork
    # (Kernel#fork, Process.fork, IO.popen("-")...). The child gets its own worker and socket.
    module ForkHooks
      def _fork
        sessions = Graphmind::Lifecycle.clients.map(&:native)
        sessions.each(&:before_fork)
        begin
          pid = super
        rescue Exception # rubocop:disable Lint/RescueException
          sessions.each(&:after_fork_parent)
          raise
        end
        if pid.zero?
          sessions.each(&:after_fork_child)
        else
          sessions.each(&:after_fork_parent)
        end
        pid
      end
    end

    Process.singleton_class.prepend(ForkHooks) if Process.respond_to?(:_fork)
    at_exit { Graphmind::Lifecycle.dispose_all }
  end
end

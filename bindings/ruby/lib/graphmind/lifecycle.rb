# frozen_string_literal: true

module Graphmind
  # Process-level hooks: dispose at exit (fork safety is the core's, see below).
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

    # Fork safety needs no Ruby hook: every native session is registered with the core's
    # pthread_atfork hooks, which run inside fork() itself (Kernel#fork, Process.fork,
    # IO.popen("-")...), so no session lock is held while Ruby code runs. The child gets its
    # own worker and socket on its first event.
    at_exit { Graphmind::Lifecycle.dispose_all }
  end
end

// A kafkajs consumer group member for interop tests: writes its assignment
// to a JSON state file on every GROUP_JOIN; SIGTERM disconnects (LeaveGroup).
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, group, topic, stateFile] = process.argv.slice(2)
const state = { pid: process.pid, assigned: [], generations: 0, errors: [], consumed: 0 }
function save () {
  fs.writeFileSync(stateFile + '.tmp', JSON.stringify(state))
  fs.renameSync(stateFile + '.tmp', stateFile)
}

async function main () {
  const kafka = new Kafka({ clientId: 'kcoord-interop-js', brokers: [bootstrap], logLevel: logLevel.WARN })
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 20000 })
  consumer.on(consumer.events.GROUP_JOIN, e => {
    state.generations += 1
    state.member_id = e.payload.memberId
    state.assigned = []
    for (const [t, parts] of Object.entries(e.payload.memberAssignment)) {
      for (const p of parts) state.assigned.push([t, p])
    }
    state.assigned.sort((a, b) => a[1] - b[1])
    save()
  })
  consumer.on(consumer.events.CRASH, e => {
    state.errors.push(String(e.payload.error && e.payload.error.type || e.payload.error))
    state.errors = state.errors.slice(-20)
    save()
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  save()
  await consumer.run({ eachMessage: async () => { state.consumed += 1 } })
  const stop = async () => {
    await consumer.disconnect()
    state.closed = true
    save()
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

main().catch(e => {
  state.errors.push(String(e.type || e.message))
  state.fatal = String(e.type || e.message)
  save()
  process.exit(1)
})
